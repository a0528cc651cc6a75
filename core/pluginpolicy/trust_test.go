package pluginpolicy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
)

// TestTrustEnv: a plugin that may reach the network gets the core's
// SSL_CERT_FILE and SSL_CERT_DIR, with their paths readable; a plugin
// without network gets neither; a value the confinement could not grant
// (relative, missing, in the Carapace home) stops the plugin with the
// variable's name and the fix.
func TestTrustEnv(t *testing.T) {
	h := home.Dir(resolved(t, t.TempDir()))
	dir := resolved(t, t.TempDir()) // as grantPath resolves it (macOS: /private/var)
	ca := filepath.Join(dir, "company-ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d1, d2 := filepath.Join(dir, "certs1"), filepath.Join(dir, "certs2")
	for _, d := range []string{d1, d2, string(h)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	inHome := filepath.Join(string(h), "ca.pem")
	if err := os.WriteFile(inHome, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	networked := parse(t, `,"network":{"public":true}`)

	for _, tc := range []struct {
		name          string
		file, certDir string
		wantEnv       []string
		wantRead      []string
		wantErr       string
	}{
		{name: "none set", wantEnv: nil},
		{name: "a file", file: ca, wantEnv: []string{"SSL_CERT_FILE=" + ca}, wantRead: []string{ca}},
		{name: "a file and two folders", file: ca, certDir: d1 + ":" + d2,
			wantEnv: []string{"SSL_CERT_FILE=" + ca, "SSL_CERT_DIR=" + d1 + ":" + d2}, wantRead: []string{ca, d1, d2}},
		{name: "relative", file: "ca.pem", wantErr: "SSL_CERT_FILE in the core's environment: \"ca.pem\" is not an absolute path"},
		{name: "missing", certDir: filepath.Join(dir, "gone"), wantErr: "SSL_CERT_DIR in the core's environment"},
		{name: "in the home", file: inHome, wantErr: "lies inside the Carapace home"},
		{name: "the root", certDir: "/", wantErr: "whole disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSL_CERT_FILE", tc.file)
			t.Setenv("SSL_CERT_DIR", tc.certDir)
			p, err := For(h, "web", "/opt/plugins/web", "/opt/plugins/web/handler", networked, config.Plugin{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "fix or unset it where the core starts") {
					t.Fatalf("error %v, want one saying %q and the fix", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Env, tc.wantEnv) {
				t.Errorf("env %q, want %q", p.Env, tc.wantEnv)
			}
			var read []string
			for _, r := range p.Read[1:] { // after its own folder
				read = append(read, r.Path)
				if !strings.Contains(r.Why, "TLS certificates to trust") {
					t.Errorf("read %s: why %q", r.Path, r.Why)
				}
			}
			if !slices.Equal(read, tc.wantRead) {
				t.Errorf("read %v, want %v", read, tc.wantRead)
			}

			// The same environment, a plugin without network: nothing.
			q, err := For(h, "notes", "/opt/plugins/notes", "/opt/plugins/notes/handler", parse(t, ""), config.Plugin{})
			if err != nil || q.Env != nil || len(q.Read) != 1 {
				t.Errorf("a plugin without network: env %q read %v, %v", q.Env, q.Read, err)
			}
		})
	}
}

func resolved(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
