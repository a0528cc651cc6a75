package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/config"
)

// TestLLMEnv: Claude Code learns its group's model (or its upstream's) in
// every slot it may ask for, and its small, fast model; a group that
// names none gets no model variable, so Claude Code keeps its own.
func TestLLMEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	cfg := `[llm]
provider = "ollama"
model = "qwen3-coder"
[llm.upstreams.cloud]
[groups.home]
[groups.fast]
model = "gpt-oss:20b"
small_fast_model = "gpt-oss:20b-mini"
[groups.work]
upstream = "cloud"
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{cfg: c}
	models := func(group string) []string {
		var out []string
		for _, kv := range r.llmEnv("s-1", group) {
			if strings.HasPrefix(kv, "ANTHROPIC_") && strings.Contains(kv, "MODEL") {
				out = append(out, kv)
			}
		}
		slices.Sort(out)
		return out
	}
	all := func(model, small string) []string {
		return []string{"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + small, "ANTHROPIC_DEFAULT_OPUS_MODEL=" + model, "ANTHROPIC_DEFAULT_SONNET_MODEL=" + model,
			"ANTHROPIC_MODEL=" + model, "ANTHROPIC_SMALL_FAST_MODEL=" + small}
	}
	for _, tt := range []struct {
		group string
		want  []string
	}{
		{"home", all("qwen3-coder", "qwen3-coder")},
		{"unconfigured", all("qwen3-coder", "qwen3-coder")},
		{"fast", all("gpt-oss:20b", "gpt-oss:20b-mini")},
		{"work", nil},
	} {
		if got := models(tt.group); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.group, got, tt.want)
		}
	}
	env := r.llmEnv("s-1", "work")
	if !slices.Contains(env, "ANTHROPIC_BASE_URL=http://127.0.0.1:8377") || !slices.Contains(env, "ANTHROPIC_API_KEY=carapace-placeholder-s-1") {
		t.Errorf("the relay's environment is missing: %q", env)
	}
}
