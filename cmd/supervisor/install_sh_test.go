//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Issue 29: install.sh downloads a release archive from a real HTTP server
// on 127.0.0.1 (as from GitHub or a mirror), installs the binary only when
// its SHA-256 is the one SHA256SUMS names, and says what it did.
func TestInstallScriptChecksTheChecksum(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		if _, err := exec.LookPath("wget"); err != nil {
			t.Skip("neither curl nor wget is installed: install.sh cannot download")
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	lean, err := os.ReadFile(leanBin)
	if err != nil {
		t.Fatal(err)
	}
	const version = "0.0.1"
	name := fmt.Sprintf("supervisor_%s_%s_%s", version, runtime.GOOS, runtime.GOARCH)
	var archive bytes.Buffer
	// Stored, not compressed: compressing 25 MB of binaries at the
	// default level took 12 s of this -race test's CPU (50 s on a busy CI
	// machine); install.sh reads any gzip level.
	gz, err := gzip.NewWriterLevel(&archive, gzip.NoCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: name + "/supervisor", Mode: 0o755, Size: int64(len(data))})
	tw.Write(data)
	tw.WriteHeader(&tar.Header{Name: name + "/supervisor-run", Mode: 0o755, Size: int64(len(lean))})
	tw.Write(lean)
	tw.Close()
	gz.Close()
	sum := sha256.Sum256(archive.Bytes())

	script, err := filepath.Abs(filepath.Join("..", "..", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sums string
		ok   bool
		want string
	}{
		{"good", hex.EncodeToString(sum[:]) + "  " + name + ".tar.gz\n", true, "installed supervisor "},
		{"tampered", strings.Repeat("0", 64) + "  " + name + ".tar.gz\n", false, "checksum mismatch for " + name + ".tar.gz"},
		{"not listed", hex.EncodeToString(sum[:]) + "  other.tar.gz\n", false, "SHA256SUMS of " + version + " names no " + name + ".tar.gz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dist := t.TempDir()
			writeFile(t, filepath.Join(dist, name+".tar.gz"), archive.String())
			writeFile(t, filepath.Join(dist, "SHA256SUMS"), tc.sums)
			srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
			defer srv.Close()
			home := t.TempDir()
			dir := filepath.Join(home, "bin")
			cmd := exec.Command("sh", script, "--version", version, "--base-url", srv.URL, "--dir", dir)
			cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok || !strings.Contains(string(out), tc.want) {
				t.Fatalf("install.sh: %v\n%s\nwant success %v and %q", err, out, tc.ok, tc.want)
			}
			got, readErr := os.ReadFile(filepath.Join(dir, "supervisor"))
			switch {
			case tc.ok && (readErr != nil || !bytes.Equal(got, data)):
				t.Fatalf("%s/supervisor is not the archive's binary: %v", dir, readErr)
			case !tc.ok && readErr == nil:
				t.Fatalf("install.sh refused the archive but left %s/supervisor", dir)
			}
			// The lean run entry goes beside it.
			got, readErr = os.ReadFile(filepath.Join(dir, "supervisor-run"))
			switch {
			case tc.ok && (readErr != nil || !bytes.Equal(got, lean)):
				t.Fatalf("%s/supervisor-run is not the archive's: %v", dir, readErr)
			case !tc.ok && readErr == nil:
				t.Fatalf("install.sh refused the archive but left %s/supervisor-run", dir)
			}
		})
	}
}
