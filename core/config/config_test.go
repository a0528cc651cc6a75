package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		toml    string
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "defaults", toml: "", check: func(t *testing.T, c *Config) {
			if c.Core.HandlerTimeout.Duration != 30*time.Second || c.Confirm.Timeout.Duration != 5*time.Minute || c.Confirm.MaxPending != 8 {
				t.Errorf("timeouts = %v, %v, max pending %d", c.Core.HandlerTimeout, c.Confirm.Timeout, c.Confirm.MaxPending)
			}
			if r := c.RateFor("echo"); r.PerMinute != 60 || r.Burst != 60 {
				t.Errorf("rate = %+v", r)
			}
			if c.Runtime.Engine != "auto" || c.Runtime.MemoryMB != 4096 || c.Sessions.MaxPerGroup != 3 || c.Sessions.IdleTimeout.Duration != 30*time.Minute ||
				c.Sessions.ConnectTimeout.Duration != 5*time.Minute {
				t.Errorf("runtime %+v, sessions %+v", c.Runtime, c.Sessions)
			}
		}},
		{name: "runtime", toml: "[runtime]\nengine = \"docker\"\nimage = \"carapace-agent-test:dev\"\nmemory_mb = 512\n[sessions]\nmax_per_group = 1\nidle_timeout = \"2m\"\nconnect_timeout = \"30s\"\n", check: func(t *testing.T, c *Config) {
			if c.Runtime.Engine != "docker" || c.Runtime.Image != "carapace-agent-test:dev" || c.Runtime.MemoryMB != 512 || c.Sessions.MaxPerGroup != 1 ||
				c.Sessions.IdleTimeout.Duration != 2*time.Minute || c.Sessions.ConnectTimeout.Duration != 30*time.Second {
				t.Errorf("runtime %+v, sessions %+v", c.Runtime, c.Sessions)
			}
		}},
		{name: "groups", toml: "[groups.main]\n[groups.family]\ntopics = [\"task.triggered\"]\n", check: func(t *testing.T, c *Config) {
			if len(c.Groups) != 2 || len(c.Groups["main"].Topics) != 2 || c.Groups["family"].Topics[0] != "task.triggered" {
				t.Errorf("groups = %+v", c.Groups)
			}
		}},
		{name: "bad group", toml: "[groups.\"../x\"]\n", wantErr: "not a group name"},
		{name: "bad topic", toml: "[groups.main]\ntopics = [\"agent.started\"]\n", wantErr: "does not start sessions"},
		{name: "llm", toml: "[llm]\nupstream = \"https://gateway.example:8443\"\ndaily_tokens = 100000\n", check: func(t *testing.T, c *Config) {
			if c.LLM.Upstream != "https://gateway.example:8443" || c.LLM.DailyTokens != 100000 || c.LLM.RequestsPerMinute != 60 || c.LLM.Port != 8377 {
				t.Errorf("llm = %+v", c.LLM)
			}
		}},
		{name: "upstream with a path", toml: "[llm]\nupstream = \"https://gateway.example/anthropic\"\n", wantErr: "without a path"},
		{name: "plain http upstream", toml: "[llm]\nupstream = \"http://api.example\"\n", wantErr: "llm.upstream"},
		{name: "upstream with credentials", toml: "[llm]\nupstream = \"https://user:hunter2@api.example\"\n", wantErr: "llm.upstream: holds a user name or password"},
		{name: "fake-IP ranges", toml: "[network]\nfake_ip = [\"198.18.0.0/16\", \"fdfe:dcba:9876::/48\"]\n", check: func(t *testing.T, c *Config) {
			got := c.Network.FakeIPPrefixes()
			if len(got) != 2 || got[0].String() != "198.18.0.0/16" || got[1].String() != "fdfe:dcba:9876::/48" {
				t.Errorf("fake_ip = %v", got)
			}
		}},
		{name: "no fake-IP by default", toml: "", check: func(t *testing.T, c *Config) {
			if c.Network.FakeIP != nil || c.Network.FakeIPPrefixes() != nil {
				t.Errorf("fake_ip = %v", c.Network.FakeIP)
			}
		}},
		{name: "fake-IP outside the ranges", toml: "[network]\nfake_ip = [\"10.0.0.0/8\"]\n", wantErr: `line 2: network.fake_ip: "10.0.0.0/8" is not inside 198.18.0.0/15 or fc00::/7`},
		{name: "fake-IP wider than the range", toml: "[network]\nfake_ip = [\"198.0.0.0/8\"]\n", wantErr: "not inside 198.18.0.0/15 or fc00::/7"},
		{name: "fake-IP the whole IPv6", toml: "[network]\nfake_ip = [\"::/0\"]\n", wantErr: "not inside 198.18.0.0/15 or fc00::/7"},
		{name: "fake-IP a public address", toml: "[network]\nfake_ip = [\"1.1.1.1/32\"]\n", wantErr: "not inside 198.18.0.0/15 or fc00::/7"},
		{name: "fake-IP not a prefix", toml: "[network]\nfake_ip = [\"198.18.0.1\"]\n", wantErr: "is not an address prefix"},
		{name: "fake-IP host bits", toml: "[network]\nfake_ip = [\"198.18.0.1/15\"]\n", wantErr: `write "198.18.0.0/15"`},
		{name: "fake-IP mapped", toml: "[network]\nfake_ip = [\"::ffff:198.18.0.0/111\"]\n", wantErr: "IPv4-mapped"},
		{name: "unknown engine", toml: "[runtime]\nengine = \"lxc\"\n", wantErr: "runtime.engine"},
		{name: "option as image", toml: "[runtime]\nimage = \"--privileged\"\n", wantErr: "runtime.image"},
		{name: "tiny memory", toml: "[runtime]\nmemory_mb = 8\n", wantErr: "memory_mb"},
		{name: "confirmation_timeout moved", toml: "[core]\nconfirmation_timeout = \"2s\"\n", wantErr: `core.confirmation_timeout has moved: write [confirm] timeout = "2s"`},
		{name: "negative max_pending", toml: "[confirm]\nmax_pending = -1\n", wantErr: "line 2: confirm.max_pending must not be negative"},
		{name: "overrides", toml: `
[confirm]
timeout = "2s"
max_pending = 3
[rate_limit]
per_minute = 10
[rate_limit.tools.echo]
per_minute = 600
burst = 5
[plugins.echo]
allowed_groups = ["main"]
`, check: func(t *testing.T, c *Config) {
			if c.Confirm.Timeout.Duration != 2*time.Second || c.Confirm.MaxPending != 3 {
				t.Errorf("confirm = %+v", c.Confirm)
			}
			if r := c.RateFor("echo"); r.PerMinute != 600 || r.Burst != 5 {
				t.Errorf("echo rate = %+v", r)
			}
			if r := c.RateFor("other"); r.PerMinute != 10 || r.Burst != 10 {
				t.Errorf("default rate = %+v", r)
			}
			if g := c.Plugins["echo"].AllowedGroups; len(g) != 1 || g[0] != "main" {
				t.Errorf("allowed_groups = %v", g)
			}
		}},
		{name: "nested plugin config", toml: "[plugins.telegram.config]\nowner_id = 42\nchats = { \"-1001\" = \"family\" }\n[plugins.telegram.config.limits.deep]\nn = 1\n",
			check: func(t *testing.T, c *Config) {
				cfg := c.Plugins["telegram"].Config
				chats, _ := cfg["chats"].(map[string]any)
				deep, _ := cfg["limits"].(map[string]any)["deep"].(map[string]any)
				if chats["-1001"] != "family" || deep["n"] != int64(1) || cfg["owner_id"] != int64(42) {
					t.Errorf("plugin config = %#v", cfg)
				}
			}},
		{name: "unknown key", toml: "[core]\nhandler_timout = \"1s\"\n", wantErr: "line 2: unknown key core.handler_timout (did you mean core.handler_timeout?)"},
		{name: "unknown key of a plugin", toml: "[plugins.telegram]\nsurfce = true\n", wantErr: "unknown key plugins.telegram.surfce (did you mean plugins.telegram.surface?)"},
		{name: "bad duration", toml: "[core]\nhandler_timeout = \"soon\"\n", wantErr: "use a number with a unit"},
		{name: "negative duration", toml: "[core]\nhandler_timeout = \"-1s\"\n", wantErr: "must be positive"},
		{name: "zero tool rate", toml: "[rate_limit.tools.echo]\nburst = 1\n", wantErr: "per_minute must be positive"},
		{name: "syntax", toml: "[core\n", wantErr: "load config"},
		{name: "empty allowed_groups", toml: "[plugins.echo]\nallowed_groups = []\n", wantErr: "plugins.echo.allowed_groups is empty"},
		{name: "bad group name", toml: "[plugins.echo]\nallowed_groups = [\"../x\"]\n", wantErr: "is not a group name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.toml")
			if tt.toml != "" {
				if err := os.WriteFile(p, []byte(tt.toml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}
