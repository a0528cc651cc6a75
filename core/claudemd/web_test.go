package claudemd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// modelWebTools are Claude Code's own web tools: in a session they would
// reach the network past Carapace (no SSRF policy, no provenance, no
// taint), so the managed settings deny them and the web plugin stands in.
var modelWebTools = []string{"WebFetch", "WebSearch"}

// TestModelWebStaysOff (issue 25, item 4): the managed settings — what
// ManagedSettings makes and the file the image carries — deny WebFetch
// and WebSearch whole (a scoped rule such as "WebFetch(domain:x)" would
// deny only that), and no allow or ask rule names them; and the web
// plugin's skill, which the agent reads, sends it to web_fetch and
// web_search and says the built-in ones are off. Removing either deny,
// or the skill's words, fails here.
func TestModelWebStaysOff(t *testing.T) {
	image, err := os.ReadFile(filepath.Join("..", "..", "Resources", "agent", "managed-settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string][]byte{"ManagedSettings": ManagedSettings(), "the image's managed-settings.json": image} {
		var s struct {
			Permissions struct{ Allow, Ask, Deny []string }
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tool := range modelWebTools {
			denied := false
			for _, d := range s.Permissions.Deny {
				denied = denied || d == tool
			}
			if !denied {
				t.Errorf("%s: %s is not denied whole: deny %q", name, tool, s.Permissions.Deny)
			}
			for _, r := range append(append([]string(nil), s.Permissions.Allow...), s.Permissions.Ask...) {
				if r == tool || strings.HasPrefix(r, tool+"(") {
					t.Errorf("%s: an allow or ask rule %q names %s", name, r, tool)
				}
			}
		}
	}

	skill, err := os.ReadFile(filepath.Join("..", "..", "plugins", "web", "skills", "web.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(skill)), " ") // one line: sentences wrap
	for _, tool := range []string{"web_fetch", "web_search"} {
		if !strings.Contains(text, "ipc tool.invoke."+tool) {
			t.Errorf("the web skill does not show how to call %s (ipc tool.invoke.%s)", tool, tool)
		}
	}
	// One sentence names both built-in tools, says they are off, and
	// points to the plugin's.
	var said bool
	for _, sentence := range regexp.MustCompile(`[.!?]\s`).Split(text, -1) {
		names := strings.Contains(sentence, modelWebTools[0]) && strings.Contains(sentence, modelWebTools[1])
		if names && strings.Contains(sentence, "are off") && strings.Contains(sentence, "use these") {
			said = true
		}
	}
	if !said {
		t.Errorf("the web skill does not say that %s are off and to use web_fetch and web_search instead:\n%s", strings.Join(modelWebTools, " and "), skill)
	}
}
