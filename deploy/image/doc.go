// Command image assembles effectd's container image without a container
// daemon: one layer holding the static effectd binary, the CA certificates and
// Go's time zone database, run as an unprivileged numeric user. It writes an
// image tarball that docker load, podman load, crane push or skopeo copy
// accept.
//
//	CGO_ENABLED=0 go build -trimpath -o effectd ./cmd/effectd
//	go run ./image -binary ../effectd -out ../effectd-image.tar -tag effectd:dev
package main
