package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where the image keeps what it holds, and who runs it.
const (
	binaryPath   = "/effectd"
	certsPath    = "/etc/ssl/certs/ca-certificates.crt" // where Go's crypto/x509 looks first on Linux
	zoneinfoPath = "/usr/share/zoneinfo.zip"            // named by ZONEINFO, which Go's time package reads
	user         = "65532:65532"                        // no name: the image has no /etc/passwd
)

func main() {
	binary := flag.String("binary", "effectd", "the effectd binary, built with CGO_ENABLED=0")
	certs := flag.String("certs", "/etc/ssl/certs/ca-certificates.crt", "the CA certificate bundle to ship")
	zoneinfo := flag.String("zoneinfo", filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"), "the time zone database to ship (Go's zip)")
	out := flag.String("out", "effectd-image.tar", "the image tarball to write")
	tag := flag.String("tag", "effectd:dev", "the image's name in the tarball")
	flag.Parse()
	if err := run(*binary, *certs, *zoneinfo, *out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binary, certs, zoneinfo, out, tag string) error {
	img, err := build(binary, certs, zoneinfo)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// build returns the image: one layer of the binary, the certificates and the
// time zones, and a configuration that runs the binary as an unprivileged user.
func build(binary, certs, zoneinfo string) (v1.Image, error) {
	if err := checkStatic(binary); err != nil {
		return nil, err
	}
	var files []file
	for _, f := range []struct {
		src, dst string
		mode     int64
	}{{binary, binaryPath, 0o555}, {certs, certsPath, 0o444}, {zoneinfo, zoneinfoPath, 0o444}} {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		files = append(files, file{f.dst, f.mode, b})
	}
	layerTar, err := tarOf(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = runtime.GOARCH, "linux"
	cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()} // reproducible: the same inputs make the same digest
	cfg.Config = v1.Config{
		Entrypoint:   []string{binaryPath},
		Cmd:          []string{"serve"},
		User:         user,
		WorkingDir:   "/",
		Env:          []string{"ZONEINFO=" + zoneinfoPath, "SSL_CERT_FILE=" + certsPath},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":  "effectd",
			"org.opencontainers.image.source": "https://github.com/effectd/effectd",
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// checkStatic refuses a binary that needs a dynamic loader: the image has none.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New(path + " is dynamically linked: build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// file is one regular file of the layer.
type file struct {
	path string
	mode int64
	data []byte
}

// tarOf returns a layer tarball of files and their parent directories, owned
// by root and dated at the epoch so that the layer is reproducible.
func tarOf(files []file) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	epoch := time.Unix(0, 0)
	for _, f := range files {
		var parents []string
		for d := filepath.Dir(f.path); d != "/"; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path[1:], Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
