package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// carapace telegram pair prints a code the plugin will accept (its hash,
// never the code, in a 0600 file), restarts a running core's plugin, and
// says what to do when no core runs or the plugin is not configured.
func TestTelegramPair(t *testing.T) {
	codeRE := regexp.MustCompile(`/start ([` + pairing.CodeAlphabet + `]{` + "10" + `})\n`)
	pairFile := func(r result, h string) (string, pairing.Pairing) {
		t.Helper()
		m := codeRE.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("no code in:\n%s", r.stdout)
		}
		path := filepath.Join(h, "data", "telegram", pairing.File)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
		}
		raw, _ := os.ReadFile(path)
		if strings.Contains(string(raw), m[1]) {
			t.Errorf("the pairing file holds the code itself:\n%s", raw)
		}
		var p pairing.Pairing
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		return m[1], p
	}

	t.Run("core running", func(t *testing.T) {
		c := newFakeCore(t)
		c.b.SetStatus(control.Status{Plugins: []control.PluginStatus{{Name: "telegram", Category: "CONFIG_ERROR"}}})
		r := carapace(t, c.home, "telegram", "pair")
		r.want(t, 0, []string{"within 10m0s", "The Telegram plugin waits for the code."}, nil)
		code, p := pairFile(r, string(c.home))
		if !slices.Equal(c.b.Restarts(), []string{"telegram"}) {
			t.Errorf("restarts %v, want the telegram plugin once", c.b.Restarts())
		}
		if p.ExpiresAt.Sub(p.CreatedAt) != pairing.TTL {
			t.Errorf("pairing %+v: want it to expire %s after it was made", p, pairing.TTL)
		}
		// A second pairing replaces the first: a new code.
		r2 := carapace(t, c.home, "telegram", "pair")
		if code2, _ := pairFile(r2, string(c.home)); code2 == code {
			t.Errorf("two pairings printed the same code %s", code)
		}
	})
	t.Run("no core", func(t *testing.T) {
		h := controltest.TempHome(t)
		r := carapace(t, h, "telegram", "pair")
		r.want(t, 0, []string{"No core is running: start one (carapace serve)"}, nil)
		pairFile(r, string(h))
	})
	t.Run("plugin not configured", func(t *testing.T) {
		c := newFakeCore(t)
		r := carapace(t, c.home, "telegram", "pair")
		r.want(t, 0, []string{"could not restart the Telegram plugin", "docs/TELEGRAM.md"}, nil)
		pairFile(r, string(c.home))
	})
}
