package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// objectFor returns an empty object of the manifest's kind.
func objectFor(t *testing.T, tm metav1.TypeMeta) any {
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Service":
		return &corev1.Service{}
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	}
	t.Fatalf("no Go type for %s %s: add it to objectFor", tm.APIVersion, tm.Kind)
	return nil
}

// documents splits every manifest into its YAML documents.
func documents(t *testing.T) map[string][][]byte {
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string][][]byte{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) > 0 {
				out[f] = append(out[f], doc)
			}
		}
	}
	return out
}

// decodeAll decodes every document strictly: an unknown or misspelt
// field is an error.
func decodeAll(t *testing.T) map[string]any {
	objs := map[string]any{}
	for file, docs := range documents(t) {
		for i, doc := range docs {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", file, i, err)
			}
			obj := objectFor(t, tm)
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", file, i, tm.Kind, err)
			}
			var meta struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			_ = yaml.Unmarshal(doc, &meta)
			objs[tm.Kind+"/"+meta.Metadata.Name] = obj
		}
	}
	return objs
}

func TestManifestsDecodeStrictly(t *testing.T) {
	objs := decodeAll(t)
	for _, want := range []string{"StatefulSet/etcd", "StatefulSet/kaas", "PodDisruptionBudget/kaas", "PodDisruptionBudget/etcd",
		"PersistentVolumeClaim/kaas-data", "Service/kaas", "Service/kaas-brokers", "Service/etcd", "Service/etcd-peers"} {
		if objs[want] == nil {
			t.Errorf("missing %s", want)
		}
	}
	etcd := objs["StatefulSet/etcd"].(*appsv1.StatefulSet)
	if etcd.Spec.Replicas == nil || *etcd.Spec.Replicas != 3 {
		t.Errorf("etcd must run 3 members")
	}
	kaas := objs["StatefulSet/kaas"].(*appsv1.StatefulSet)
	pod := kaas.Spec.Template.Spec
	c := pod.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("kaas needs a readiness probe on /readyz")
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 30 {
		t.Errorf("kaas needs time for its graceful hand-off on SIGTERM")
	}
	args := strings.Join(c.Args, " ")
	for _, flag := range []string{"--cluster-etcd=", "--cluster-name=", "--broker-id=", "--listen=", "--advertised-listener=", "--data=", "--admin=", "--session-ttl="} {
		if !strings.Contains(args, flag) {
			t.Errorf("kaas args lack %s: %s", flag, args)
		}
	}
	pvc := objs["PersistentVolumeClaim/kaas-data"].(*corev1.PersistentVolumeClaim)
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("the shared volume must be ReadWriteMany")
	}
	shared := false
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			shared = true
		}
	}
	if !shared {
		t.Errorf("kaas pods do not mount %s", pvc.Name)
	}
	pdb := objs["PodDisruptionBudget/kaas"].(*policyv1.PodDisruptionBudget)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("kaas PDB should allow one broker down at a time")
	}
}

// The strict decoder is what catches typos: prove it does.
func TestStrictDecodingRejectsTypos(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replicas: 1\n  servceName: typo\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.StatefulSet{}); err == nil || !strings.Contains(err.Error(), "servceName") {
		t.Fatalf("a misspelt field was accepted: %v", err)
	}
}
