package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLLMUpstreams: the upstreams by name, their defaults, and what a
// group chooses; today's configs (no provider) keep their meaning.
func TestLLMUpstreams(t *testing.T) {
	tests := []struct {
		name, toml string
		wantErr    string
		check      func(t *testing.T, c *Config)
	}{
		{name: "today's default", toml: "", check: func(t *testing.T, c *Config) {
			if c.LLM.Provider != "anthropic" || c.LLM.Upstream != "https://api.anthropic.com" || c.LLM.Auth != "" {
				t.Errorf("llm %+v", c.LLM)
			}
		}},
		{name: "today's gateway", toml: "[llm]\nupstream = \"https://gateway.example:8443\"\n", check: func(t *testing.T, c *Config) {
			if c.LLM.Provider != "anthropic" || c.LLM.Upstream != "https://gateway.example:8443" || c.LLM.Auth != "" {
				t.Errorf("llm %+v", c.LLM)
			}
		}},
		{name: "ollama", toml: "[llm]\nprovider = \"ollama\"\n", check: func(t *testing.T, c *Config) {
			if c.LLM.Upstream != "http://127.0.0.1:11434" || c.LLM.Auth != "none" {
				t.Errorf("llm %+v", c.LLM)
			}
		}},
		{name: "llamacpp on localhost", toml: "[llm]\nprovider = \"llamacpp\"\nupstream = \"http://localhost:8081\"\n", check: func(t *testing.T, c *Config) {
			if c.LLM.Upstream != "http://localhost:8081" || c.LLM.Auth != "none" {
				t.Errorf("llm %+v", c.LLM)
			}
		}},
		{name: "named upstreams and a group's choice", toml: `
[llm]
provider = "ollama"
[llm.upstreams.work]
provider = "custom"
upstream = "https://llm-gateway.corp.example"
auth = "bearer"
[groups.main]
upstream = "work"
models = ["claude-sonnet-4-5", "claude-haiku-4-5"]
model = "claude-sonnet-4-5"
small_fast_model = "claude-haiku-4-5"
[groups.home]
models = ["qwen3-coder"]
`, check: func(t *testing.T, c *Config) {
			name, u := c.UpstreamFor("main")
			if name != "work" || u != (LLMUpstream{Provider: "custom", Upstream: "https://llm-gateway.corp.example", Auth: "bearer"}) {
				t.Errorf("main: %q %+v", name, u)
			}
			name, u = c.UpstreamFor("home")
			if name != "" || u.Provider != "ollama" || u.Upstream != "http://127.0.0.1:11434" || u.Auth != "none" {
				t.Errorf("home: %q %+v", name, u)
			}
			if _, u = c.UpstreamFor("not-configured"); u.Provider != "ollama" {
				t.Errorf("a group not in [groups]: %+v", u)
			}
			if g := c.Groups["main"]; g.Model != "claude-sonnet-4-5" || !slices.Equal(g.Models, []string{"claude-sonnet-4-5", "claude-haiku-4-5"}) {
				t.Errorf("main %+v", g)
			}
		}},
		{name: "http to a LAN host", toml: "[llm]\nprovider = \"ollama\"\nupstream = \"http://192.168.1.20:11434\"\n",
			wantErr: `line 3: llm.upstream: "http://192.168.1.20:11434": plain http is allowed only to a loopback address (127.0.0.0/8, ::1, localhost), where it never crosses a network: use https:// for 192.168.1.20`},
		{name: "http to a LAN host, named", toml: "[llm.upstreams.lan]\nprovider = \"custom\"\nauth = \"none\"\nupstream = \"http://gpu-box.lan:8080\"\n",
			wantErr: `llm.upstreams.lan.upstream: "http://gpu-box.lan:8080": plain http is allowed only to a loopback address`},
		{name: "unknown provider", toml: "[llm]\nprovider = \"openai\"\n", wantErr: `llm.provider: "openai": use one of anthropic, ollama, llamacpp, custom`},
		{name: "custom without url", toml: "[llm]\nprovider = \"custom\"\nauth = \"bearer\"\n", wantErr: "a custom upstream needs its URL"},
		{name: "custom without auth", toml: "[llm]\nprovider = \"custom\"\nupstream = \"https://gw.example\"\n", wantErr: `a custom upstream needs auth = "x-api-key", "bearer" or "none"`},
		{name: "bad auth", toml: "[llm]\nprovider = \"ollama\"\nauth = \"basic\"\n", wantErr: `llm.auth: "basic": use one of x-api-key, bearer, none`},
		{name: "auth for anthropic", toml: "[llm]\nauth = \"bearer\"\n", wantErr: "llm.auth: the anthropic provider sends the stored key"},
		{name: "unknown group upstream", toml: "[groups.main]\nupstream = \"local\"\n", wantErr: `groups.main.upstream: "local" is not an upstream: define it as [llm.upstreams.local]`},
		{name: "model outside models", toml: "[groups.main]\nmodels = [\"qwen3-coder\"]\nmodel = \"gpt-oss:20b\"\n", wantErr: `groups.main.model: "gpt-oss:20b" is not one of the group's models (qwen3-coder)`},
		{name: "empty models", toml: "[groups.main]\nmodels = []\n", wantErr: "groups.main.models: is empty, which would allow no model"},
		{name: "an upstream's model", toml: "[llm]\nprovider = \"ollama\"\nmodel = \"qwen3-coder\"\n[groups.main]\n[groups.fast]\nmodel = \"gpt-oss:20b\"\nsmall_fast_model = \"gpt-oss:20b-mini\"\n", check: func(t *testing.T, c *Config) {
			if m, s := c.ModelsFor("main"); m != "qwen3-coder" || s != "qwen3-coder" {
				t.Errorf("main: %q %q", m, s)
			}
			if m, s := c.ModelsFor("fast"); m != "gpt-oss:20b" || s != "gpt-oss:20b-mini" {
				t.Errorf("fast: %q %q", m, s)
			}
			if m, s := c.ModelsFor("unconfigured"); m != "qwen3-coder" || s != "qwen3-coder" {
				t.Errorf("a group not in [groups]: %q %q", m, s)
			}
		}},
		{name: "no model at all", toml: "", check: func(t *testing.T, c *Config) {
			if m, s := c.ModelsFor("main"); m != "" || s != "" {
				t.Errorf("%q %q; want Claude Code's own", m, s)
			}
		}},
		{name: "upstream's model outside a group's models", toml: "[llm]\nprovider = \"ollama\"\nmodel = \"qwen3-coder\"\n[groups.main]\nmodels = [\"gpt-oss:20b\"]\n",
			wantErr: `groups.main.models: the group's upstream asks for model "qwen3-coder", which is not one of these (gpt-oss:20b)`},
		{name: "bad upstream model", toml: "[llm.upstreams.x]\nprovider = \"ollama\"\nmodel = \"-x\"\n", wantErr: `llm.upstreams.x.model: "-x" is not a model name`},
		{name: "bad model name", toml: "[groups.main]\nsmall_fast_model = \"a b\"\n", wantErr: `groups.main.small_fast_model: "a b" is not a model name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(path, []byte(tt.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
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

// TestLLMKeys: the new keys are known, so `config set` and the unknown-key
// check accept them.
func TestLLMKeys(t *testing.T) {
	keys := Keys()
	for _, k := range []string{"llm.provider", "llm.auth", "llm.model", "llm.upstreams.*.model", "llm.upstreams.*.provider", "llm.upstreams.*.upstream", "llm.upstreams.*.auth", "llm.upstreams.*.ca_file",
		"groups.*.upstream", "groups.*.models", "groups.*.model", "groups.*.small_fast_model"} {
		if !slices.Contains(keys, k) {
			t.Errorf("Keys lacks %s", k)
		}
	}
}
