// Package validation holds a test, in a module of its own, that puts the
// objects `planrun kube run` creates and `planrun kube render` prints
// through the API server's own create path from k8s.io/kubernetes:
// decoding, defaulting, conversion to the internal types, the registry
// strategies' PrepareForCreate and their validation. It is a separate
// module so that k8s.io/kubernetes never becomes a dependency of planrun.
//
// Run it with: cd kube/validation && go test ./...
package validation
