package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3" // the driver, which the carapace binary links (cmd/wiring)

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/control/controltest"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/internal/sqlitedb"
	"github.com/carapace-dev/carapace/plugins/telegram/pairing"
)

// pairedOwner records owner as the plugin records a pairing: in the meta
// table of its database (plugins/telegram's TestPairingOwnerSeenByTheCLI
// checks pairing.Owner against the plugin's own store).
func pairedOwner(t *testing.T, h home.Dir, owner string) {
	t.Helper()
	db, err := sqlitedb.Open(t.Context(), filepath.Join(h.DataDir("telegram"), pairing.DBFile), "telegram",
		[]string{"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT INTO meta(key, value) VALUES(?, ?)", pairing.OwnerKey, owner); err != nil {
		t.Fatal(err)
	}
}

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
		c.b.SetStatus(api.Status{Plugins: []api.PluginStatus{{Name: "telegram", Category: "CONFIG_ERROR"}}})
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

// Once the bot has an owner, pair prints no code (nobody could use it)
// and says how to hand the bot over; --replace forgets the owner and
// pairs anew; unpair forgets the owner; an owner_id in config.toml is
// never unpaired. Each change restarts a running core's plugin.
func TestTelegramOwnerCommands(t *testing.T) {
	core := func(t *testing.T) *fakeCore {
		c := newFakeCore(t)
		c.b.SetStatus(api.Status{Plugins: []api.PluginStatus{{Name: "telegram", Healthy: true, State: "healthy"}}})
		pairedOwner(t, c.home, "4242")
		return c
	}
	t.Run("pair while paired", func(t *testing.T) {
		c := core(t)
		r := carapace(t, c.home, "telegram", "pair")
		r.want(t, 1, nil, []string{"already has an owner, Telegram user 4242", "carapace telegram pair --replace", "carapace telegram unpair"})
		if strings.Contains(r.stdout, "/start") {
			t.Errorf("a code nobody can use: %s", r.stdout)
		}
		if pairing.Pending(c.home.DataDir("telegram")) || len(c.b.Restarts()) != 0 {
			t.Errorf("a refused pair wrote a code (%v) or restarted the plugin (%v)", pairing.Pending(c.home.DataDir("telegram")), c.b.Restarts())
		}
	})
	t.Run("pair --replace", func(t *testing.T) {
		c := core(t)
		r := carapace(t, c.home, "telegram", "pair", "--replace")
		r.want(t, 0, []string{"Telegram user 4242 is no longer the owner", "/start "}, nil)
		if owner, err := pairing.Owner(t.Context(), c.home.DataDir("telegram")); err != nil || owner != 0 {
			t.Errorf("owner after --replace: %d (%v)", owner, err)
		}
		if !pairing.Pending(c.home.DataDir("telegram")) || !slices.Equal(c.b.Restarts(), []string{"telegram"}) {
			t.Errorf("pending %v, restarts %v", pairing.Pending(c.home.DataDir("telegram")), c.b.Restarts())
		}
	})
	t.Run("unpair", func(t *testing.T) {
		c := core(t)
		carapace(t, c.home, "telegram", "unpair").want(t, 0, []string{"Telegram user 4242 is no longer the owner", "carapace telegram pair"}, nil)
		if owner, err := pairing.Owner(t.Context(), c.home.DataDir("telegram")); err != nil || owner != 0 {
			t.Errorf("owner after unpair: %d (%v)", owner, err)
		}
		if !slices.Equal(c.b.Restarts(), []string{"telegram"}) {
			t.Errorf("restarts %v, want the telegram plugin once", c.b.Restarts())
		}
		carapace(t, c.home, "telegram", "unpair").want(t, 0, []string{"Nobody is paired"}, nil)
		if n := len(c.b.Restarts()); n != 1 {
			t.Errorf("unpairing nobody restarted the plugin: %v", c.b.Restarts())
		}
		// Unpaired, pairing works again.
		carapace(t, c.home, "telegram", "pair").want(t, 0, []string{"/start "}, nil)
	})
	t.Run("owner_id in config.toml", func(t *testing.T) {
		h := controltest.TempHome(t)
		if err := os.WriteFile(h.Config(), []byte("[plugins.telegram.config]\nowner_id = 777\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"telegram", "pair"}, {"telegram", "pair", "--replace"}, {"telegram", "unpair"}} {
			r := carapace(t, h, args...)
			r.want(t, 1, nil, []string{"Telegram user 777, set as owner_id in config.toml", "remove owner_id"})
			if strings.Contains(r.stdout, "/start") {
				t.Errorf("%v printed a code: %s", args, r.stdout)
			}
		}
		if pairing.Pending(h.DataDir("telegram")) {
			t.Error("a code was written while owner_id is set")
		}
	})
}
