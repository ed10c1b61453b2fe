package provisioning

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
)

// poolZones restricts the NodePool to the zones.
func poolZones(zones ...string) fixtures.PoolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: zones})
	}
}

// mounting mounts the claim.
func mounting(claim string) fixtures.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: claim, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// mountingEphemeral adds a generic ephemeral volume of the StorageClass.
func mountingEphemeral(class string) fixtures.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{
			Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)}}}}})
	}
}

// zonalVolume returns a PersistentVolume pinned to the zone and a claim in "default" bound to it.
func zonalVolume(name, zone string) []client.Object {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
		}}}},
	}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, StorageClassName: ptr.To("")}}
	return []client.Object{pv, pvc}
}

// TestProvisionHonoursVolumeTopology runs provisioning rounds over a fake API server holding
// claims, volumes and StorageClasses: a pod gets a NodeClaim from a NodePool whose nodes can use
// its volumes, even a lighter one, and a pod no NodePool can serve gets an Event naming its claim.
func TestProvisionHonoursVolumeTopology(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	objects := func(extra ...client.Object) []client.Object {
		out := []client.Object{
			nodePoolObject("zone-1", poolZones(fake.Zone1)),
			nodePoolObject("zone-2", poolZones(fake.Zone2), poolWeight(100)),
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "zonal-1"}, Provisioner: "example.com/csi", VolumeBindingMode: &wffc,
				AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: corev1.LabelTopologyZone, Values: []string{fake.Zone1}}}}}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "default"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("zonal-1")}},
		}
		out = append(out, zonalVolume("data", fake.Zone1)...)
		out = append(out, zonalVolume("far", fake.Zone3)...)
		return append(out, extra...)
	}
	tests := []struct {
		name          string
		objects       []client.Object
		wantNominated map[string]string
		wantEvent     string
	}{
		{name: "a pod without volumes takes the heavier NodePool",
			objects: objects(podObject("plain")), wantNominated: map[string]string{"plain": "zone-2"}},
		{name: "a pod whose volume is pinned to a zone gets a node there",
			objects: objects(podObject("db", mounting("data"))), wantNominated: map[string]string{"db": "zone-1"}},
		{name: "an unbound WaitForFirstConsumer claim follows its StorageClass",
			objects: objects(podObject("fresh", mounting("fresh"))), wantNominated: map[string]string{"fresh": "zone-1"}},
		{name: "a generic ephemeral volume follows its template's StorageClass",
			objects: objects(podObject("scratch", mountingEphemeral("zonal-1"))), wantNominated: map[string]string{"scratch": "zone-1"}},
		{name: "a volume in a zone no NodePool offers: the Event names the claim",
			objects: objects(podObject("stuck", mounting("far"))), wantNominated: map[string]string{},
			wantEvent: "Warning FailedProvisioning pod default/stuck cannot be placed: NodePool \"zone-2\" ruled out: PersistentVolumeClaim default/far: volume pinned to zone test-zone-3, which NodePool zone-2 cannot offer"},
		{name: "a missing claim: the Event names it",
			objects: objects(podObject("orphan", mounting("nope"))), wantNominated: map[string]string{},
			wantEvent: "Warning FailedProvisioning pod default/orphan: PersistentVolumeClaim default/nope does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nominated, _, recorded := provisionRound(t, tc.objects, nil)
			if !maps.Equal(nominated, tc.wantNominated) {
				t.Errorf("nominated %v, want %v; events:\n%s", nominated, tc.wantNominated, strings.Join(recorded, "\n"))
			}
			if tc.wantEvent != "" && !slices.ContainsFunc(recorded, func(e string) bool { return strings.Contains(e, tc.wantEvent) }) {
				t.Errorf("no Event contains %q; recorded:\n%s", tc.wantEvent, strings.Join(recorded, "\n"))
			}
		})
	}
}
