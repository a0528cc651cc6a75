package mail

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testCert returns a server TLS config with a certificate for 127.0.0.1,
// and a client config that trusts it (httptest's).
func testCert(t *testing.T) (server, client *tls.Config) {
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(ts.Close)
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return &tls.Config{Certificates: ts.TLS.Certificates}, &tls.Config{RootCAs: roots}
}

func TestTLS(t *testing.T) {
	for _, mode := range []string{"tls", "starttls"} {
		t.Run(mode, func(t *testing.T) {
			srv, cli := testCert(t)
			f := newServersWith(t, srv, mode)
			f.seedTestdata("plain")
			f.clientTLS = cli
			cfg := f.config(func(acct, _ map[string]any) { acct["imap_security"], acct["smtp_security"] = mode, mode })
			f.start(cfg)
			if n := len(results(t, f.must("mail_search", map[string]any{}))); n != 1 {
				t.Fatalf("search over %s: %d results", mode, n)
			}
			id := f.must("mail_draft", draftArgs())["draft_id"].(string)
			_, digest, err := f.h.previewSend(ctx60(t), "main", id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.sendAs("main", id, digest); err != nil {
				t.Fatalf("send over %s: %v", mode, err)
			}
			if len(f.smtp.sent()) != 1 {
				t.Fatal("not sent")
			}

			// A server whose certificate is not trusted is not talked to
			// (the password is never sent).
			f.clientTLS = nil
			f.dir = t.TempDir()
			f.start(cfg)
			if _, err := f.call("mail_search", map[string]any{}); code(err) != CodeConnect {
				t.Fatalf("an untrusted certificate: %v, want %s", err, CodeConnect)
			}
			f.smtp.mu.Lock()
			logins := f.smtp.logins
			f.smtp.mu.Unlock()
			if _, err := f.h.smtpSend(ctx60(t), f.h.cfg.Accounts[0], &wire{From: testUser, To: []string{"a@example.org"}, Data: []byte("x\r\n")}); code(err) != CodeConnect {
				t.Fatalf("SMTP with an untrusted certificate: %v, want %s", err, CodeConnect)
			}
			f.smtp.mu.Lock()
			defer f.smtp.mu.Unlock()
			if f.smtp.logins != logins || len(f.smtp.msgs) != 1 {
				t.Error("a login or a mail went to an untrusted server")
			}
		})
	}
	// A plain server is refused when TLS is asked for.
	f := newServers(t)
	f.start(f.config(func(acct, _ map[string]any) { acct["imap_security"] = "starttls" }))
	_, err := f.call("mail_search", map[string]any{})
	if c := code(err); c != CodeConnect || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("STARTTLS with a server without it: %v", err)
	}
}
