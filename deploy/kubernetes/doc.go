// Package kubernetes holds the manifests that run kaas on Kubernetes
// (etcd.yaml, kaas.yaml; see docs/cluster.md) and the test that decodes
// every one of them strictly with the Kubernetes API types, so a typo in
// a field name fails CI instead of being silently dropped by kubectl.
package kubernetes
