package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// effectdBinary returns a static effectd binary: $EFFECTD_BINARY (make image
// builds one), else one built here from the repository.
func effectdBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EFFECTD_BINARY"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "effectd")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/effectd")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building effectd: %v\n%s", err, b)
	}
	return out
}

// TestImage: the image written to a tarball runs /effectd serve as a
// non-root numeric user, and holds nothing but the binary, the CA
// certificates and the time zone database, each readable and none writable.
func TestImage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "effectd-image.tar")
	zoneinfo := filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip")
	if err := run(effectdBinary(t), "/etc/ssl/certs/ca-certificates.crt", zoneinfo, out, "effectd:test"); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	uid, gid, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("user %q: want a numeric non-root uid (Kubernetes' runAsNonRoot checks a number)", c.User)
	}
	if n, err := strconv.Atoi(gid); err != nil || n == 0 {
		t.Errorf("user %q: want a numeric non-root gid", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/effectd"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q, cmd %q; want [/effectd] [serve]", c.Entrypoint, c.Cmd)
	}
	if !slices.Contains(c.Env, "ZONEINFO=/usr/share/zoneinfo.zip") {
		t.Errorf("env %q lacks ZONEINFO, without which Go finds no time zone in the image", c.Env)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}

	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]int64{} // regular file → mode
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			files["/"+h.Name] = h.Mode
		default:
			t.Errorf("%s: type %c; want only regular files and directories", h.Name, h.Typeflag)
		}
		if h.Mode&0o022 != 0 || h.Mode&(0o4000|0o2000) != 0 {
			t.Errorf("%s: mode %o is writable by others or setuid", h.Name, h.Mode)
		}
	}
	want := map[string]int64{"/effectd": 0o555, "/etc/ssl/certs/ca-certificates.crt": 0o444, "/usr/share/zoneinfo.zip": 0o444}
	if len(files) != len(want) {
		t.Errorf("files %v; want exactly %v", files, want)
	}
	for name, mode := range want {
		if got, ok := files[name]; !ok || got != mode {
			t.Errorf("%s: mode %o, present %v; want %o", name, got, ok, mode)
		}
	}
}

// TestImageRefusesDynamicBinary: a binary that needs a dynamic loader, which
// the image lacks, is refused.
func TestImageRefusesDynamicBinary(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to use as a dynamically linked binary")
	}
	sh, _ = filepath.EvalSymlinks(sh)
	if _, err := build(sh, "/etc/ssl/certs/ca-certificates.crt", filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip")); err == nil ||
		!strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("build(%s): %v; want a refusal naming CGO_ENABLED=0", sh, err)
	}
}
