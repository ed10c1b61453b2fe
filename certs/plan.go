package certs

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// material is what the Rotator's Secret holds, parsed and judged at one instant.
type material struct {
	// ca signs new serving certificates; nil when missing or unusable.
	ca *KeyPair
	// leaf is the serving pair; nil when missing or unusable.
	leaf *KeyPair
	// trusted are the CA certificates the apiserver is meant to trust: those of ca-bundle.crt that are still
	// valid, plus ca.crt when it is a valid CA even if its key is lost.
	trusted []*x509.Certificate
	// bundlePEM is ca-bundle.crt exactly as stored: what must be found in the webhook configurations.
	bundlePEM []byte
	// published are all certificates in bundlePEM that parse, valid or not.
	published []*x509.Certificate
	// injectedHash and injectedAt say which bundle was last confirmed in every webhook configuration, and since when.
	injectedHash string
	injectedAt   time.Time
	// leafIssuedAt is when the serving certificate was written.
	leafIssuedAt time.Time
	// problems describe unusable data found in the Secret; each one is repaired by the plan.
	problems []string
}

// readMaterial parses secret (nil when it does not exist). It never fails: whatever cannot be used is
// reported in problems and treated as missing.
func readMaterial(secret *corev1.Secret, now time.Time) material {
	var m material
	if secret == nil {
		return m
	}
	d := secret.Data
	present := func(keys ...string) bool {
		for _, k := range keys {
			if len(d[k]) > 0 {
				return true
			}
		}
		return false
	}
	if present(SecretKeyCACert, SecretKeyCAKey) {
		ca, err := ParseKeyPair(d[SecretKeyCACert], d[SecretKeyCAKey])
		switch {
		case err != nil:
			m.problems = append(m.problems, fmt.Sprintf("%s/%s: %v", SecretKeyCACert, SecretKeyCAKey, err))
			// A CA certificate whose key is lost still vouches for the leaf it signed.
			if cs, perr := ParseCertificates(d[SecretKeyCACert]); perr == nil && isUsableCA(cs[0], now) == "" {
				m.trusted = append(m.trusted, cs[0])
			}
		case isUsableCA(ca.Cert, now) != "":
			m.problems = append(m.problems, fmt.Sprintf("%s cannot sign: %s", SecretKeyCACert, isUsableCA(ca.Cert, now)))
		default:
			m.ca = ca
			m.trusted = append(m.trusted, ca.Cert)
		}
	}
	if present(SecretKeyCABundle) {
		m.bundlePEM = d[SecretKeyCABundle]
		cs, err := ParseCertificates(d[SecretKeyCABundle])
		if err != nil {
			m.problems = append(m.problems, fmt.Sprintf("%s: %v", SecretKeyCABundle, err))
		}
		m.published = cs
		for _, c := range cs {
			if isUsableCA(c, now) == "" {
				m.trusted = append(m.trusted, c)
			}
		}
	}
	m.trusted = uniqueCerts(m.trusted)
	if present(SecretKeyTLSCert, SecretKeyTLSKey) {
		leaf, err := ParseKeyPair(d[SecretKeyTLSCert], d[SecretKeyTLSKey])
		if err != nil {
			m.problems = append(m.problems, fmt.Sprintf("%s/%s: %v", SecretKeyTLSCert, SecretKeyTLSKey, err))
		} else {
			m.leaf = leaf
		}
	}
	a := secret.Annotations
	m.injectedHash = a[AnnotationInjectedBundle]
	m.injectedAt = parseTime(a[AnnotationInjectedAt])
	m.leafIssuedAt = parseTime(a[AnnotationLeafIssuedAt])
	if m.leafIssuedAt.IsZero() && m.leaf != nil {
		m.leafIssuedAt = m.leaf.Cert.NotBefore.Add(NotBeforeSkew)
	}
	return m
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func bundleHash(pemBytes []byte) string {
	sum := sha256.Sum256(pemBytes)
	return hex.EncodeToString(sum[:])
}

func uniqueCerts(in []*x509.Certificate) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range in {
		if !slices.ContainsFunc(out, func(o *x509.Certificate) bool { return bytes.Equal(o.Raw, c.Raw) }) {
			out = append(out, c)
		}
	}
	return out
}

// action is one thing a plan did, for the log, the Events and the metrics.
type action struct {
	reason  string
	message string
	warning bool
	// quiet actions are repeated on every reconcile while they last: logged at V(1), no Event.
	quiet bool
}

// Event reasons used on the Secret.
const (
	reasonInvalidData       = "InvalidCertificateData"
	reasonCACreated         = "CACreated"
	reasonCARotationStarted = "CARotationStarted"
	reasonCARetired         = "CARetired"
	reasonLeafIssued        = "ServingCertificateIssued"
	reasonLeafWaiting       = "ServingCertificateWaiting"
	reasonBundleInjected    = "CABundleInjected"
)

// planResult is the desired Secret content and what it took to get there.
type planResult struct {
	next    material
	changed bool
	actions []action
	// wakeAt is the next instant at which the plan would change without any event.
	wakeAt time.Time
}

// plan decides, from what the Secret holds at now and whether its ca-bundle.crt is currently in every
// webhook configuration, what the Secret must hold next. It is a pure function (apart from key
// generation), so every rotation step can be driven by a fake clock.
//
// The invariant it keeps: the serving certificate in its result always chains to a CA that is in the
// bundle currently injected, except when there is nothing valid to protect (first start, or an unusable
// leaf). A leaf is switched to a new CA only once a bundle containing that CA has been in every webhook
// configuration for PropagationDelay, and an old CA leaves the bundle only when it signs nothing served
// and PropagationDelay has passed since the leaf stopped depending on it.
func plan(now time.Time, cur material, o Options, bundleInjected bool) (planResult, error) {
	res := planResult{next: cur}
	next := &res.next
	wake := func(t time.Time) {
		if res.wakeAt.IsZero() || t.Before(res.wakeAt) {
			res.wakeAt = t
		}
	}
	for _, p := range cur.problems {
		res.actions = append(res.actions, action{reason: reasonInvalidData, warning: true,
			message: fmt.Sprintf("Secret %s/%s holds unusable data, which is replaced: %s", o.Namespace, o.SecretName, p)})
	}

	// 1. The CA that signs new leaves: kept while valid and outside its renewal window.
	caWhy := ""
	switch {
	case cur.ca == nil:
		caWhy = "there is no usable CA"
	case !now.Before(cur.ca.Cert.NotAfter.Add(-o.CARenewBefore)):
		caWhy = fmt.Sprintf("CA %q expires at %s", cur.ca.Cert.Subject.CommonName, cur.ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if caWhy != "" {
		ca, err := NewCA(now, o.CAValidity, "joiner-webhook-ca@"+now.UTC().Format("2006-01-02T15:04:05.000Z"))
		if err != nil {
			return res, err
		}
		next.ca = ca
		reason, extra := reasonCACreated, ""
		if len(cur.trusted) > 0 {
			reason, extra = reasonCARotationStarted, "; it is published next to the old CA before the serving certificate moves to it"
		}
		res.actions = append(res.actions, action{reason: reason, message: fmt.Sprintf("%s: created CA %q valid until %s%s",
			caWhy, ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.RFC3339), extra)})
	}
	candidates := uniqueCerts(append([]*x509.Certificate{next.ca.Cert}, cur.trusted...))
	current := []*x509.Certificate{next.ca.Cert}

	// 2. The serving leaf.
	leafWhy, urgent := "", false
	leaf := cur.leaf
	switch {
	case leaf == nil:
		leafWhy, urgent = "there is no usable serving certificate", true
	case now.Before(leaf.Cert.NotBefore) || !now.Before(leaf.Cert.NotAfter):
		leafWhy, urgent = "the serving certificate is outside its validity period", true
	case !verifiesWith(leaf.Cert, candidates, now):
		leafWhy, urgent = "the serving certificate is not signed by any CA in the bundle", true
	case !sameNames(leaf.Cert, o.DNSNames, o.IPAddresses):
		leafWhy = "the serving certificate's names differ from the configured ones"
	case !verifiesWith(leaf.Cert, current, now):
		leafWhy = "the serving certificate is signed by the previous CA"
	case !now.Before(leaf.Cert.NotAfter.Add(-o.LeafRenewBefore)):
		leafWhy = fmt.Sprintf("the serving certificate expires at %s", leaf.Cert.NotAfter.UTC().Format(time.RFC3339))
	default:
		wake(leaf.Cert.NotAfter.Add(-o.LeafRenewBefore))
	}
	if leafWhy != "" {
		signedByCurrent := leaf != nil && verifiesWith(leaf.Cert, current, now)
		inStoredBundle := slices.ContainsFunc(cur.published, func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, next.ca.Cert.Raw) })
		confirmed := inStoredBundle && bundleInjected && cur.injectedHash == bundleHash(cur.bundlePEM) && !cur.injectedAt.IsZero()
		published := confirmed && !now.Before(cur.injectedAt.Add(o.PropagationDelay))
		// An unusable leaf is replaced at once. While a new CA is not yet published, its replacement is
		// signed by the previous CA when that one still can sign and is in the published bundle, so the
		// new leaf is trusted from its first handshake; it moves to the new CA like any other leaf.
		signer := next.ca
		if urgent && !published && cur.ca != nil && cur.ca != next.ca && isUsableCA(cur.ca.Cert, now) == "" &&
			slices.ContainsFunc(cur.published, func(c *x509.Certificate) bool { return bytes.Equal(c.Raw, cur.ca.Cert.Raw) }) {
			signer = cur.ca
		}
		switch {
		case urgent || signedByCurrent || published:
			l, err := NewServingLeaf(now, o.LeafValidity, signer, o.DNSNames, o.IPAddresses)
			if err != nil {
				return res, err
			}
			next.leaf, next.leafIssuedAt = l, now
			res.actions = append(res.actions, action{reason: reasonLeafIssued, message: fmt.Sprintf(
				"%s: issued a serving certificate signed by %q, valid until %s", leafWhy, signer.Cert.Subject.CommonName, l.Cert.NotAfter.UTC().Format(time.RFC3339))})
			if signer == next.ca {
				wake(l.Cert.NotAfter.Add(-o.LeafRenewBefore))
			} else {
				wake(now.Add(o.PropagationDelay))
			}
		case confirmed:
			wake(cur.injectedAt.Add(o.PropagationDelay))
		default:
			// The bundle still has to reach every webhook configuration; that write changes the Secret's
			// annotations and wakes the reconciler. The fallback covers a lost event.
			wake(now.Add(o.PropagationDelay))
		}
		if next.leaf == cur.leaf {
			res.actions = append(res.actions, action{reason: reasonLeafWaiting, quiet: true, message: fmt.Sprintf(
				"%s: keeping it until CA %q has been in every caBundle for %s", leafWhy, next.ca.Cert.Subject.CommonName, o.PropagationDelay)})
		}
	}

	// 3. The bundle: the current CA, the CA of the served leaf, and any other valid CA for PropagationDelay
	// after the leaf last changed.
	keep := []*x509.Certificate{next.ca.Cert}
	for _, c := range candidates[1:] {
		switch {
		case verifiesWith(next.leaf.Cert, []*x509.Certificate{c}, now):
			keep = append(keep, c)
			wake(c.NotAfter)
		case now.Before(next.leafIssuedAt.Add(o.PropagationDelay)):
			keep = append(keep, c)
			wake(next.leafIssuedAt.Add(o.PropagationDelay))
		default:
			res.actions = append(res.actions, action{reason: reasonCARetired, message: fmt.Sprintf(
				"CA %q (valid until %s) no longer signs the served certificate; removed it from the bundle", c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))})
		}
	}
	slices.SortStableFunc(keep[1:], func(a, b *x509.Certificate) int { return b.NotAfter.Compare(a.NotAfter) })
	next.trusted = keep
	next.bundlePEM = EncodeCertificates(keep)
	next.published = keep
	next.problems = nil
	wake(next.ca.Cert.NotAfter.Add(-o.CARenewBefore))

	res.changed = len(cur.problems) > 0 || next.ca != cur.ca || next.leaf != cur.leaf || !bytes.Equal(next.bundlePEM, cur.bundlePEM)
	return res, nil
}

// secretData renders m into Secret data, keeping keys it does not own from old.
func (m material) secretData(old map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(old)+5)
	for k, v := range old {
		out[k] = v
	}
	out[SecretKeyCACert] = m.ca.CertPEM
	out[SecretKeyCAKey] = m.ca.KeyPEM
	out[SecretKeyCABundle] = m.bundlePEM
	out[SecretKeyTLSCert] = m.leaf.CertPEM
	out[SecretKeyTLSKey] = m.leaf.KeyPEM
	return out
}

// describe summarises m for logs.
func (m material) describe() string {
	var b strings.Builder
	if m.ca != nil {
		fmt.Fprintf(&b, "ca=%q until %s", m.ca.Cert.Subject.CommonName, m.ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if m.leaf != nil {
		fmt.Fprintf(&b, " leaf until %s", m.leaf.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, " bundle=%d CA(s)", len(m.trusted))
	return b.String()
}
