// Package certs keeps the TLS serving certificate of Joiner's admission webhooks valid and trusted by the
// apiserver, without restarts and without a window in which the apiserver rejects the served certificate.
//
// Two modes share one in-memory certificate source (ServingCert), whose GetCertificate is wired into
// controller-runtime's webhook server through webhook.Options.TLSOpts:
//
//   - Self-managed (Rotator, the default): a CA and a serving leaf live in one Secret. The CA is long-lived
//     (10 years by default) and is never regenerated while it is valid; when it nears expiry a new CA is
//     published next to the old one in every caBundle before the leaf is switched to it, and the old CA is
//     dropped only afterwards. The caBundle is written into every webhook of Joiner's own named
//     Mutating- and ValidatingWebhookConfigurations and nowhere else.
//   - cert-manager (CertManagerReconciler): cert-manager issues the serving certificate into the same
//     Secret, its cainjector fills the caBundle through the cert-manager.io/inject-ca-from annotation, and
//     this package only creates the cert-manager objects, annotates the configurations and serves the
//     Secret.
//
// Keys are ECDSA P-256 and certificates are signed with ECDSA-SHA256 (crypto/x509 only). Every replica
// runs the reconciler; writes use optimistic concurrency and a loser adopts the winner's
// Secret. The package must not touch any Secret, webhook configuration or cert-manager object other than
// the ones named in its options, must not register metrics or anything else in package-level globals, and
// must not require cert-manager's CRDs in self-managed mode.
package certs
