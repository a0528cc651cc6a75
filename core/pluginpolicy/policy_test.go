package pluginpolicy

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/manifest"
)

func parse(t *testing.T, extra string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse("m.json", []byte(`{"description":"d","version":"1.0.0","app_compat":">=0.1.0","author":{"name":"a"},
		"provides":{"channels":[],"tools":[]},"subscribes":[]`+extra+`}`), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDefaultsGrantOnlyItsFolders(t *testing.T) {
	h := home.Dir(t.TempDir())
	p, err := For(h, "echo", "/opt/plugins/echo", "/opt/plugins/echo/handler", parse(t, ""), config.Plugin{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Read) != 1 || p.Read[0].Path != "/opt/plugins/echo" || len(p.Write) != 1 || p.Write[0].Path != h.DataDir("echo") {
		t.Errorf("folders: read %v write %v", p.Read, p.Write)
	}
	if len(p.Hosts) != 0 || p.Public || p.Unconfined {
		t.Errorf("a plugin that declares nothing reaches: %+v", p)
	}
}

func TestHosts(t *testing.T) {
	const schema = `,"config_schema":{"type":"object","properties":{
		"api_url":{"type":"string","default":"https://api.telegram.org"},
		"accounts":{"type":"array"}}}`
	for _, tc := range []struct {
		name    string
		network string
		cfg     map[string]any
		want    []string
		wantErr string
	}{
		{"manifest", `{"hosts":["Api.Example.com:443","127.0.0.1:8080"]}`, nil, []string{"api.example.com:443 manifest", "127.0.0.1:8080 manifest"}, ""},
		{"config default", `{"hosts_from_config":["api_url"]}`, nil, []string{"api.telegram.org:443 config api_url"}, ""},
		{"config set", `{"hosts_from_config":["api_url"]}`, map[string]any{"api_url": "http://127.0.0.1:9000/bot"}, []string{"127.0.0.1:9000 config api_url"}, ""},
		{"ipv6", `{"hosts_from_config":["api_url"]}`, map[string]any{"api_url": "https://[::1]:8443"}, []string{"[::1]:8443 config api_url"}, ""},
		{"wildcard", `{"hosts_from_config":["accounts.*.imap","accounts.*.smtp"]}`, map[string]any{"accounts": []any{
			map[string]any{"imap": "imaps://imap.example.com", "smtp": "smtp.example.com:465"},
			map[string]any{"imap": "mail.example.org:993"},
		}}, []string{"imap.example.com:993 config accounts.0.imap", "mail.example.org:993 config accounts.1.imap", "smtp.example.com:465 config accounts.0.smtp"}, ""},
		{"duplicate once", `{"hosts":["api.telegram.org:443"],"hosts_from_config":["api_url"]}`, nil, []string{"api.telegram.org:443 manifest"}, ""},
		{"credentials in url", `{"hosts_from_config":["api_url"]}`, map[string]any{"api_url": "https://u:p@example.com"}, nil, "user name or password"},
		{"no port", `{"hosts_from_config":["api_url"]}`, map[string]any{"api_url": "gopher://example.com"}, nil, "no default port"},
		{"not a string", `{"hosts_from_config":["api_url"]}`, map[string]any{"api_url": 5}, nil, "must be a URL or host:port"},
		{"bad port", `{"hosts_from_config":["api_url"]}`, map[string]any{"api_url": "example.com:99999"}, nil, "from 1 to 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := For(home.Dir(t.TempDir()), "x", "/p/x", "/p/x/handler", parse(t, `,"network":`+tc.network+schema), config.Plugin{Config: tc.cfg})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range p.Hosts {
				got = append(got, h.String()+" "+h.From)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("hosts = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPathGrants(t *testing.T) {
	h := home.Dir(t.TempDir())
	notes := t.TempDir()
	m := parse(t, `,"filesystem":[{"config":"notes","description":"the notes"},{"config":"out","description":"exports","write":true}]`)
	p, err := For(h, "x", "/p/x", "/p/x/handler", m, config.Plugin{Config: map[string]any{"notes": notes, "out": notes + "/out"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Read) != 2 || p.Read[1].Path != notes || len(p.Write) != 2 || p.Write[1].Path != notes+"/out" {
		t.Errorf("read %v write %v", p.Read, p.Write)
	}
	// Not set: not granted.
	p, _ = For(h, "x", "/p/x", "/p/x/handler", m, config.Plugin{})
	if len(p.Read) != 1 || len(p.Write) != 1 {
		t.Errorf("ungranted folders in the policy: read %v write %v", p.Read, p.Write)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(string(h), link); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ path, want string }{
		{"notes", "not an absolute path"},
		{"/", "whole disk"},
		{string(h), "Carapace home"},
		{h.Path("credentials"), "Carapace home"},
		{filepath.Dir(string(h)), "Carapace home"},
		{link, "Carapace home"},
	} {
		_, err := For(h, "x", "/p/x", "/p/x/handler", m, config.Plugin{Config: map[string]any{"notes": bad.path}})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("grant %q: err = %v, want %q", bad.path, err, bad.want)
		}
	}
}
