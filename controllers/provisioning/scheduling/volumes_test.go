package scheduling

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// Storage objects for the volume tests: fake.InstanceTypes have offerings in test-zone-1, -2 and -3.

type volumeOption func(*corev1.PersistentVolume)

// persistentVolume returns a volume whose required node affinity has one term per option given
// through pinned (none: no node affinity).
func persistentVolume(name string, opts ...volumeOption) corev1.PersistentVolume {
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, o := range opts {
		o(&pv)
	}
	return pv
}

// pinned adds a required node affinity term of the expressions.
func pinned(exprs ...corev1.NodeSelectorRequirement) volumeOption {
	return func(pv *corev1.PersistentVolume) {
		if pv.Spec.NodeAffinity == nil {
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{}}
		}
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms = append(pv.Spec.NodeAffinity.Required.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
}

func volumeLabel(key, value string) volumeOption {
	return func(pv *corev1.PersistentVolume) { pv.Labels[key] = value }
}

func zoneIn(zones ...string) corev1.NodeSelectorRequirement {
	return nodeSelectorRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...)
}

// boundClaim returns a claim in "default" bound to the volume, without a StorageClass.
func boundClaim(name, volume string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: ptr.To("")}}
}

// unboundClaim returns a claim in "default" of the StorageClass; nil leaves storageClassName unset.
func unboundClaim(name string, class *string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}}
}

// storageClass returns a class binding in mode whose allowedTopologies is one term of the zones
// (none: no allowedTopologies).
func storageClass(name string, mode storagev1.VolumeBindingMode, zones ...string) storagev1.StorageClass {
	sc := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/csi", VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: zones},
		}}}
	}
	return sc
}

func asDefault(sc storagev1.StorageClass, created time.Time) storagev1.StorageClass {
	sc.Annotations = map[string]string{defaultClassAnnotation: "true"}
	sc.CreationTimestamp = metav1.NewTime(created)
	return sc
}

// withClaim mounts the claim.
func withClaim(claim string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: claim, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// withEphemeral adds a generic ephemeral volume whose claim template has the StorageClass.
func withEphemeral(volume, class string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)}}}}})
	}
}

// withUID gives the pod a UID, which the claims of its ephemeral volumes name as their owner.
func withUID(uid string) podOption { return func(p *corev1.Pod) { p.UID = types.UID(uid) } }

// ownedBy makes the claim the ephemeral volume claim of the pod with the UID.
func ownedBy(c corev1.PersistentVolumeClaim, pod, uid string) corev1.PersistentVolumeClaim {
	c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: types.UID(uid), Controller: ptr.To(true)}}
	return c
}

// zonesOf returns the zones a placement allows: "existing:<node>" on an existing node, the
// NodeClaim's allowed zones joined by "," for a new one, "error: ..." when unschedulable.
func zonesOf(t *testing.T, r *Results, pod string) string {
	t.Helper()
	if msg := errorOf(r, pod); msg != "" {
		return "error: " + msg
	}
	for _, e := range r.ExistingNodes {
		for _, p := range e.Pods {
			if p.Name == pod {
				return "existing:" + e.Node.Name
			}
		}
	}
	zone, ok := planOf(t, r, pod).Requirements.Get(karpv1.LabelTopologyZone)
	if !ok {
		return "any"
	}
	return strings.Join(zone.Values(), ",")
}

type volumeCase struct {
	name      string
	pod       []podOption
	pools     []NodePool // default: one NodePool in every zone
	existing  []*ExistingNode
	noStorage bool   // simulate without Volumes
	want      string // zonesOf, or for errors a prefix of it
}

func TestVolumeTopology(t *testing.T) {
	volumes := volumeTopologyFixture()
	tests := volumeTopologyCases()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("p", "100m", "100Mi", tt.pod...)
			pools := tt.pools
			if pools == nil {
				pools = []NodePool{pool(newNodePool("default"))}
			}
			in := Input{Pods: []*corev1.Pod{p}, NodePools: pools, ExistingNodes: tt.existing, Volumes: volumes}
			if tt.noStorage {
				in.Volumes = nil
			}
			got := zonesOf(t, solve(t, in), p.Name)
			if strings.HasPrefix(tt.want, "error: ") {
				if !strings.HasPrefix(got, tt.want) {
					t.Fatalf("got\n  %s\nwant a message starting\n  %s", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// volumeTopologyFixture is the storage of TestVolumeTopology: claims, volumes and classes in zones 1 to 3.
func volumeTopologyFixture() *Volumes {
	z1, z2, z3 := fake.Zone1, fake.Zone2, fake.Zone3
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	return NewVolumes(
		[]corev1.PersistentVolumeClaim{
			boundClaim("data", "pv-z1"),
			boundClaim("two-zones", "pv-z1-z2"),
			boundClaim("legacy", "pv-legacy"),
			boundClaim("ebs", "pv-ebs"),
			boundClaim("local", "pv-local"),
			boundClaim("unpinned", "pv-anywhere"),
			boundClaim("lost", "pv-gone"),
			unboundClaim("fresh", ptr.To("wffc-z2")),
			unboundClaim("open", ptr.To("wffc-anywhere")),
			unboundClaim("later", ptr.To("immediate-z2")),
			unboundClaim("static", ptr.To("")),
			unboundClaim("defaulted", nil),
			unboundClaim("classless", ptr.To("missing")),
			ownedBy(boundClaim("web-0-scratch", "pv-z1"), "web-0", "uid-web-0"),
			boundClaim("web-1-scratch", "pv-z1"),
		},
		[]corev1.PersistentVolume{
			persistentVolume("pv-z1", pinned(zoneIn(z1))),
			persistentVolume("pv-z1-z2", pinned(zoneIn(z1)), pinned(zoneIn(z2))),
			persistentVolume("pv-legacy", volumeLabel(corev1.LabelFailureDomainBetaZone, z2+"__"+z3)),
			persistentVolume("pv-ebs", pinned(nodeSelectorRequirement("topology.ebs.csi.aws.com/zone", corev1.NodeSelectorOpIn, z3))),
			persistentVolume("pv-local", pinned(nodeSelectorRequirement(corev1.LabelHostname, corev1.NodeSelectorOpIn, "n1"))),
			persistentVolume("pv-anywhere"),
		},
		[]storagev1.StorageClass{
			storageClass("wffc-z2", wffc, z2),
			storageClass("wffc-anywhere", wffc),
			storageClass("immediate-z2", immediate, z2),
			asDefault(storageClass("old-default", wffc, z1), time.Unix(1, 0)),
			asDefault(storageClass("standard", wffc, z3), time.Unix(2, 0)),
		},
	)
}

func volumeTopologyCases() []volumeCase {
	z1, z2, z3 := fake.Zone1, fake.Zone2, fake.Zone3
	zone1Pool := func() NodePool {
		return pool(newNodePool("zone-1", poolRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, z1)))
	}
	zone2Pool := func() NodePool {
		return pool(newNodePool("zone-2", poolWeight(100), poolRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, z2)))
	}
	return []volumeCase{
		{name: "a bound volume pins the node to its zone", pod: []podOption{withClaim("data")}, want: z1},
		{name: "a volume with two terms takes the first one a NodePool offers", pod: []podOption{withClaim("two-zones")}, want: z1},
		{name: "a volume with two terms takes the second when the first is not offered",
			pod: []podOption{withClaim("two-zones")}, pools: []NodePool{zone2Pool()}, want: z2},
		{name: "the pod's own affinity narrows the volume's zones",
			pod: []podOption{withClaim("two-zones"), withNodeAffinity(zoneIn(z2, z3))}, want: z2},
		{name: "the zone labels of an older volume count", pod: []podOption{withClaim("legacy")}, want: z2 + "," + z3},
		{name: "the EBS CSI driver's zone key is the zone", pod: []podOption{withClaim("ebs")}, want: z3},
		{name: "a volume without node affinity restricts nothing", pod: []podOption{withClaim("unpinned")}, want: "any"},
		{name: "an unbound WaitForFirstConsumer claim gets its class's topology", pod: []podOption{withClaim("fresh")}, want: z2},
		{name: "a WaitForFirstConsumer class without allowed topologies restricts nothing", pod: []podOption{withClaim("open")}, want: "any"},
		{name: "an unbound Immediate claim restricts nothing yet", pod: []podOption{withClaim("later")}, want: "any"},
		{name: "a claim without a class restricts nothing until bound", pod: []podOption{withClaim("static")}, want: "any"},
		{name: "a claim without storageClassName gets the newest default class", pod: []podOption{withClaim("defaulted")}, want: z3},
		{name: "a generic ephemeral volume gets its template's class topology", pod: []podOption{withEphemeral("scratch", "wffc-z2")}, want: z2},
		{name: "a generic ephemeral volume's claim, once created for the pod, decides",
			pod: []podOption{func(p *corev1.Pod) { p.Name = "web-0" }, withUID("uid-web-0"), withEphemeral("scratch", "wffc-z2")}, want: z1},
		{name: "several volumes must all be usable",
			pod: []podOption{withClaim("two-zones"), withClaim("fresh")}, want: z2},
		{name: "a heavier NodePool that cannot offer the zone is passed over",
			pod: []podOption{withClaim("data")}, pools: []NodePool{zone2Pool(), zone1Pool()}, want: z1},
		{name: "an existing node in another zone is passed over",
			pod: []podOption{withClaim("data")}, existing: []*ExistingNode{existingNode("n2", z2)}, want: z1},
		{name: "an existing node in the zone is used",
			pod: []podOption{withClaim("data")}, existing: []*ExistingNode{existingNode("n1", z1)}, want: "existing:n1"},
		{name: "a local volume goes to its node",
			pod: []podOption{withClaim("local")}, existing: []*ExistingNode{existingNode("n1", z1), existingNode("n2", z1)}, want: "existing:n1"},
		{name: "without storage information volumes restrict nothing", pod: []podOption{withClaim("data")}, noStorage: true, want: "any"},

		{name: "a NodePool that cannot offer the zone is named with the claim",
			pod: []podOption{withClaim("data")}, pools: []NodePool{zone2Pool()},
			want: `error: pod default/p cannot be placed: NodePool "zone-2" ruled out: PersistentVolumeClaim default/data: volume pinned to zone test-zone-1, which NodePool zone-2 cannot offer`},
		{name: "a class's topology a NodePool cannot offer is named with the claim",
			pod: []podOption{withClaim("fresh")}, pools: []NodePool{zone1Pool()},
			want: `error: pod default/p cannot be placed: NodePool "zone-1" ruled out: PersistentVolumeClaim default/fresh: StorageClass wffc-z2 provisions only in zone test-zone-2, which NodePool zone-1 cannot offer`},
		{name: "existing nodes that cannot use the volume say so",
			pod: []podOption{withClaim("local")}, existing: []*ExistingNode{existingNode("n2", z1)},
			want: `error: pod default/p cannot be placed: NodePool "default" ruled out: PersistentVolumeClaim default/local: volume pinned to node n1, which NodePool default cannot offer; no existing node fits (1 nodes: 1× PersistentVolumeClaim default/local: volume pinned to node n1, which the node cannot offer)`},
		{name: "a volume the pod's own node selector rules out",
			pod:  []podOption{withClaim("data"), withNodeSelector(corev1.LabelTopologyZone, z2)},
			want: "error: pod default/p: PersistentVolumeClaim default/data: volume pinned to zone test-zone-1, which its node selector and required node affinity rule out"},
		{name: "volumes that rule each other out",
			pod:  []podOption{withClaim("data"), withClaim("fresh")},
			want: "error: pod default/p: PersistentVolumeClaim default/fresh: StorageClass wffc-z2 provisions only in zone test-zone-2, which its node selector, required node affinity and other volumes rule out"},
		{name: "a missing claim", pod: []podOption{withClaim("nope")},
			want: "error: pod default/p: PersistentVolumeClaim default/nope does not exist"},
		{name: "a claim bound to a missing volume", pod: []podOption{withClaim("lost")},
			want: "error: pod default/p: PersistentVolumeClaim default/lost is bound to PersistentVolume pv-gone, which does not exist"},
		{name: "a claim of a missing class", pod: []podOption{withClaim("classless")},
			want: "error: pod default/p: PersistentVolumeClaim default/classless: StorageClass missing does not exist"},
		{name: "an ephemeral volume's name taken by another claim",
			pod:  []podOption{func(p *corev1.Pod) { p.Name = "web-1" }, withUID("uid-web-1"), withEphemeral("scratch", "wffc-z2")},
			want: "error: pod default/web-1: PersistentVolumeClaim default/web-1-scratch exists but was not created for the pod's ephemeral volume scratch"},
	}
}

// TestSchedulerWithVolumes checks that a prepared Scheduler honours volumes only through
// WithVolumes, and that WithVolumes leaves the Scheduler it copies unchanged.
func TestSchedulerWithVolumes(t *testing.T) {
	volumes := NewVolumes([]corev1.PersistentVolumeClaim{boundClaim("data", "pv")},
		[]corev1.PersistentVolume{persistentVolume("pv", pinned(zoneIn(fake.Zone2)))}, nil)
	sch, err := Prepare([]NodePool{pool(newNodePool("default"))}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{newPod("p", "100m", "100Mi", withClaim("data"))}
	for _, tt := range []struct {
		name string
		sch  *Scheduler
		want string
	}{
		{"with volumes", sch.WithVolumes(volumes), fake.Zone2},
		{"the original", sch, "any"},
	} {
		r, err := tt.sch.Solve(t.Context(), pods, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := zonesOf(t, r, "p"); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}
