// Package helm holds the tests of effectd's Helm chart (deploy/helm/effectd):
// helm lint, and the manifests helm template renders checked for what a
// deployment of effectd needs (probes, grace period, migrate hook, no root).
package helm
