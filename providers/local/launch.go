package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// The annotation that hands a Node to kwok, which then plays its kubelet: it makes the Node Ready
// and runs the pods bound to it.
const (
	// KwokNodeAnnotation is the annotation key kwok selects Nodes by.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokNodeAnnotationValue is its value.
	KwokNodeAnnotationValue = "fake"
)

// instance is a launched local instance. The fields from deleted on are guarded by Provider.mu;
// the others never change after launch.
type instance struct {
	id         InstanceID
	providerID string
	// nodeClaim is what Get and List return: the launched NodeClaim, created at launch time.
	nodeClaim *karpv1.NodeClaim
	// node is the Node the instance registers.
	node *corev1.Node
	// stop is closed when the instance is terminated, to stop its registration.
	stop chan struct{}

	deleted      bool
	registeredAt time.Time // zero until the Node was created
	nodeUID      types.UID // of the created Node
}

// createdNode returns a reference to the Node this process created for the instance.
func (inst *instance) createdNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: inst.id.ID, UID: inst.nodeUID}}
}

// launch records an instance of the chosen offering for the NodeClaim and schedules the creation
// of its Node, unless its type is set never to register.
func (p *Provider) launch(nodeClaim *karpv1.NodeClaim, class ResolvedNodeClass, tmpl *typeTemplate, choice offeringChoice) (*karpv1.NodeClaim, error) {
	name, err := newInstanceID()
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
	}
	zone := choice.o.Zone()
	iid := InstanceID{Region: class.Region, Zone: zone, ID: name}
	rec := launchRecord{
		NodeClaimUID:      nodeClaim.UID,
		ProviderID:        iid.ProviderID(),
		InstanceType:      choice.it.Name,
		Zone:              zone,
		CapacityType:      choice.o.CapacityType(),
		LaunchTime:        metav1.NewMicroTime(p.clock.Now()),
		RegistrationDelay: metav1.Duration{Duration: class.RegistrationDelay},
		NeverRegisters:    !p.failures.registers(choice.it.Name),
	}
	out, _, err := p.start(nodeClaim, class, tmpl, choice, rec)
	if err != nil {
		return nil, err
	}
	p.log.Info("launched instance", "nodeclaim", nodeClaim.Name, "providerID", rec.ProviderID, "instanceType", choice.it.Name,
		"zone", zone, "capacityType", choice.o.CapacityType(), "price", choice.o.Price, "registers", !rec.NeverRegisters,
		"registrationDelay", class.RegistrationDelay)
	return out, nil
}

// start records the instance rec describes, launched on the chosen offering for the NodeClaim,
// and schedules the creation of its Node for rec's launch time plus its registration delay (at
// once when that has passed), unless it never registers. It returns what Create returns, and
// whether the instance was recorded already (then nothing is scheduled again).
func (p *Provider) start(nodeClaim *karpv1.NodeClaim, class ResolvedNodeClass, tmpl *typeTemplate, choice offeringChoice, rec launchRecord) (*karpv1.NodeClaim, bool, error) {
	iid, err := ParseProviderID(rec.ProviderID)
	if err != nil {
		return nil, false, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
	}
	pid := rec.ProviderID

	// Labels, lowest precedence first: the class's, what the NodeClaim fixes, and the facts of
	// the launched type and offering.
	labels := maps.Clone(class.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	if err != nil {
		return nil, false, fmt.Errorf("launch nodeclaim %s: spec.requirements: %w", nodeClaim.Name, err)
	}
	maps.Copy(labels, reqs.Labels())
	maps.Copy(labels, nodeClaim.Labels)
	maps.Copy(labels, tmpl.labels)
	maps.Copy(labels, choice.o.Requirements.Labels())
	labels[karpv1.LabelTopologyRegion] = iid.Region

	out := nodeClaim.DeepCopy()
	out.Labels = labels
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[NodeClassHashAnnotationKey] = class.Hash()
	out.Annotations[NodeClassHashVersionAnnotationKey] = NodeClassHashVersion
	out.Annotations[InstanceAnnotationKey] = rec.encode()
	out.Status.ProviderID = pid
	out.Status.Capacity = choice.it.Capacity.DeepCopy()
	out.Status.Allocatable = choice.it.Allocatable().DeepCopy()

	recorded := out.DeepCopy()
	recorded.CreationTimestamp = metav1.NewTime(rec.LaunchTime.Time)
	inst := &instance{
		id:         iid,
		providerID: pid,
		nodeClaim:  recorded,
		node:       newNode(iid, out, rec),
		stop:       make(chan struct{}),
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("launch nodeclaim %s: the local provider has stopped: %w", nodeClaim.Name, err)
	}
	if have := p.instances[pid]; have != nil {
		again := have.nodeClaim.DeepCopy()
		again.CreationTimestamp = nodeClaim.CreationTimestamp
		return again, true, nil
	}
	if _, gone := p.terminated[pid]; gone {
		return nil, false, fmt.Errorf("launch nodeclaim %s: instance %s was terminated", nodeClaim.Name, pid)
	}
	p.recordLocked(inst, rec)
	return out, false, nil
}

// recordLocked adds the instance and, unless it never registers, starts its registration at
// rec's launch time plus its registration delay (at once when that has passed). p.mu must be
// held and p.ctx live.
func (p *Provider) recordLocked(inst *instance, rec launchRecord) {
	p.instances[inst.providerID] = inst
	if rec.NeverRegisters {
		return
	}
	var timer clock.Timer
	if wait := rec.registersAt().Sub(p.clock.Now()); wait > 0 {
		timer = p.clock.NewTimer(wait)
	}
	p.wg.Add(1)
	go p.register(inst, timer)
}

// newNode returns the Node an instance registers: named after the instance, handed to kwok,
// annotated with the instance's launch record, with the launched NodeClaim's labels, its taints
// and startup taints plus the unregistered taint, and the type's capacity and allocatable.
func newNode(iid InstanceID, launched *karpv1.NodeClaim, rec launchRecord) *corev1.Node {
	labels := maps.Clone(launched.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelHostname] = iid.ID
	taints := cloudprovider.RegistrationTaints(launched)
	arch := launched.Labels[karpv1.LabelArch]
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        iid.ID,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue, InstanceAnnotationKey: rec.encode()},
		},
		Spec: corev1.NodeSpec{ProviderID: iid.ProviderID(), Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    launched.Status.Capacity.DeepCopy(),
			Allocatable: launched.Status.Allocatable.DeepCopy(),
			NodeInfo:    corev1.NodeSystemInfo{Architecture: arch, OperatingSystem: karpv1.OSLinux},
		},
	}
}

// register waits for the registration delay (timer; nil for none) and creates the instance's
// Node, retrying on errors, until it succeeds, the instance is terminated or the provider stops.
func (p *Provider) register(inst *instance, timer clock.Timer) {
	defer p.wg.Done()
	if timer != nil {
		defer timer.Stop()
		select {
		case <-p.ctx.Done():
			return
		case <-inst.stop:
			return
		case <-timer.C():
		}
	}
	log := p.log.WithValues("providerID", inst.providerID, "node", inst.id.ID)
	for {
		node := inst.node.DeepCopy()
		err := p.kube.Create(p.ctx, node)
		if apierrors.IsAlreadyExists(err) {
			node, err = p.getNode(p.ctx, inst.id.ID)
			if err == nil && (node == nil || node.Spec.ProviderID != inst.providerID) {
				log.Error(errors.New("a Node of another instance has the same name"), "instance cannot register")
				return
			}
		}
		if err == nil {
			p.registered(inst, node)
			return
		}
		log.Error(err, "create node; retrying", "in", registrationRetryInterval)
		select {
		case <-p.ctx.Done():
			return
		case <-inst.stop:
			return
		case <-p.clock.After(registrationRetryInterval):
		}
	}
}

// registered records that the instance's Node exists, or deletes the Node when the instance was
// terminated while it was being created.
func (p *Provider) registered(inst *instance, node *corev1.Node) {
	p.mu.Lock()
	deleted := inst.deleted
	if !deleted {
		inst.registeredAt = p.clock.Now()
		inst.nodeUID = node.UID
	}
	p.mu.Unlock()
	if deleted {
		if err := p.deleteNode(p.ctx, node); err != nil {
			p.log.Error(err, "delete the Node of an instance terminated while it registered", "node", node.Name)
		}
		return
	}
	p.log.V(1).Info("instance registered its node", "providerID", inst.providerID, "node", node.Name)
}

// getNode returns the Node with the name, or nil when there is none.
func (p *Provider) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	if err := p.kube.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n, nil
}

// deleteNode deletes the Node, only if it is still the same object (same UID). A Node already
// gone, or replaced by another of the same name, is not an error.
func (p *Provider) deleteNode(ctx context.Context, node *corev1.Node) error {
	ref := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	var opts []client.DeleteOption
	if node.UID != "" {
		uid := node.UID
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	if err := p.kube.Delete(ctx, ref, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete node %s: %w", node.Name, err)
	}
	return nil
}
