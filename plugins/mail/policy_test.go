package mail

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	coreconfig "github.com/carapace-dev/carapace/core/config"
	"github.com/carapace-dev/carapace/core/home"
	coremanifest "github.com/carapace-dev/carapace/core/manifest"
	"github.com/carapace-dev/carapace/core/pluginpolicy"
)

// TestConfigAsTheCoreLoadsIt: the documented config (testdata/config.toml)
// loads as config.toml, matches the manifest's config_schema, parses in
// the handler, and gives the plugin's confinement exactly its accounts'
// IMAP and SMTP servers (network.hosts_from_config), and no others.
func TestConfigAsTheCoreLoadsIt(t *testing.T) {
	c, err := coreconfig.Load(filepath.Join("testdata", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// As the loader hands it on: through JSON, numbers as json.Number.
	b, err := json.Marshal(c.Plugins["mail"].Config)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	m, err := coremanifest.Load(".", coremanifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ValidateConfig("config.toml", cfg); err != nil {
		t.Fatal(err)
	}
	parsed, err := parseConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Accounts) != 2 || parsed.capFor("main") != 10 || parsed.Accounts[1].SMTPSecurity != SecurityStartTLS || parsed.Accounts[1].IMAPSecurity != SecurityTLS {
		t.Errorf("parsed %+v", parsed)
	}
	pol, err := pluginpolicy.For(home.Dir(t.TempDir()), Name, ".", "./handler", m, coreconfig.Plugin{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range pol.Hosts {
		hosts = append(hosts, h.String())
	}
	slices.Sort(hosts)
	want := []string{"imap.fastmail.com:993", "imap.mail.me.com:993", "smtp.fastmail.com:465", "smtp.mail.me.com:587"}
	if !slices.Equal(hosts, want) || pol.Public {
		t.Errorf("the plugin may reach %v (public %v), want exactly %v", hosts, pol.Public, want)
	}

	// A plain connection off the loopback passes the schema but not the
	// handler, which says why.
	cfg["accounts"].([]any)[0].(map[string]any)["imap_security"] = "plain"
	if err := m.ValidateConfig("config.toml", cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := parseConfig(cfg); err == nil {
		t.Error("plain IMAP to imap.fastmail.com was accepted")
	}
}
