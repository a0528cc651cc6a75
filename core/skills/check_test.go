package skills

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/carapace-dev/carapace/core/manifest"
)

func hasWarning(ws []Warning, file, substr string) bool {
	for _, w := range ws {
		if w.File == file && strings.Contains(w.Message, substr) {
			return true
		}
	}
	return false
}

func checkManifest(desc string, tools ...string) *manifest.Manifest {
	m := &manifest.Manifest{Description: desc}
	for _, n := range tools {
		m.Provides.Tools = append(m.Provides.Tools, manifest.Tool{
			Name: n, Description: "does " + n, RiskLevel: "low",
			ArgumentsSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		})
	}
	return m
}

func TestCheck(t *testing.T) {
	md := func(files ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for i := 0; i+1 < len(files); i += 2 {
			fsys[files[i]] = &fstest.MapFile{Data: []byte(files[i+1])}
		}
		return fsys
	}
	tests := []struct {
		name   string
		m      *manifest.Manifest
		skills fstest.MapFS
		want   []string // Warning.String() of every warning, in order
	}{
		{
			name:   "all declared and mentioned",
			m:      checkManifest("Notes", "search_notes", "add_note"),
			skills: md("p.md", "# Notes\n\n## search_notes\n\n    ipc tool.invoke.search_notes '{}'\n\nThen add_note.\n"),
		},
		{
			name:   "intrinsics may be used",
			m:      checkManifest("Notes", "add_note"),
			skills: md("p.md", "Use add_note.\n\n## get_diagnostics\n\nipc tool.invoke.list_tools and tool.invoke.get_session_info.\n"),
		},
		{
			name:   "undeclared invocation",
			m:      checkManifest("Notes", "add_note"),
			skills: md("p.md", "line one add_note\n\n    ipc tool.invoke.delete_note '{}'\n"),
			want:   []string{"skills/p.md:3: tool.invoke.delete_note: the manifest declares no such tool"},
		},
		{
			name:   "dotted name of the old convention",
			m:      checkManifest("Notes", "add_note"),
			skills: md("p.md", "add_note\nUse tool.invoke.notes.add.\n"),
			want:   []string{`skills/p.md:2: tool.invoke.notes.add: the manifest declares no such tool (and tool name "notes.add" must be snake_case: use "notes_add")`},
		},
		{
			name:   "undeclared heading",
			m:      checkManifest("Notes", "add_note"),
			skills: md("p.md", "# Notes\n\n## add_note\n\n### `remove_note`\n\n## Two words\n\n## plain\n\n## remove_note ##\n"),
			want: []string{
				`skills/p.md:5: heading "remove_note" looks like a tool name, but the manifest declares no such tool`,
				`skills/p.md:11: heading "remove_note" looks like a tool name, but the manifest declares no such tool`,
			},
		},
		{
			name:   "headings in code blocks are not headings, invocations are still calls",
			m:      checkManifest("Notes", "add_note"),
			skills: md("p.md", "add_note\n```sh\n# some_comment\nipc tool.invoke.gone_tool\n```\n"),
			want:   []string{"skills/p.md:4: tool.invoke.gone_tool: the manifest declares no such tool"},
		},
		{
			name:   "declared but never mentioned",
			m:      checkManifest("Notes", "add_note", "search_notes", "note"),
			skills: md("p.md", "Use add_note, notes and search_notes_v2.\n"),
			want: []string{
				"manifest.json: tool note is declared but no skill file mentions it",
				"manifest.json: tool search_notes is declared but no skill file mentions it",
			},
		},
		{
			name:   "mentions count across files",
			m:      checkManifest("Notes", "add_note", "search_notes"),
			skills: md("p.md", "add_note\n", "more.md", "search_notes\nipc tool.invoke.nope.\n"),
			want:   []string{"skills/more.md:2: tool.invoke.nope: the manifest declares no such tool"},
		},
		{
			name:   "no skill files",
			m:      checkManifest("Notes", "add_note"),
			skills: md("readme.txt", "x"),
			want: []string{
				"skills/: no .md skill file; the agent learns the tools only from the generated reference",
				"skills/readme.txt: left out of SKILL.md: not a .md file",
			},
		},
		{
			name: "no skills folder",
			m:    checkManifest("Notes", "add_note"),
			want: []string{"skills/: no .md skill file; the agent learns the tools only from the generated reference"},
		},
		{
			name:   "empty description and own front matter",
			m:      checkManifest(" \n", "add_note"),
			skills: md("p.md", "---\nname: p\n---\nadd_note\n## bad_one\n"),
			want: []string{
				"manifest.json: the description is empty; it is what tells the agent when to use the plugin's skill",
				"skills/p.md: its front matter is ignored: the core generates SKILL.md's front matter from manifest.json",
				`skills/p.md:5: heading "bad_one" looks like a tool name, but the manifest declares no such tool`,
			},
		},
		{
			name:   "angle brackets",
			m:      checkManifest("Notes <b>bold</b>", "add_note"),
			skills: md("p.md", "add_note"),
			want:   []string{"manifest.json: the description's '<' and '>' become '‹' and '›' in SKILL.md's front matter, where tags are not allowed"},
		},
		{
			name:   "over-long description",
			m:      checkManifest(strings.Repeat("d", MaxDescLen), "add_note"),
			skills: md("p.md", "add_note"),
			want:   []string{"manifest.json: the description is longer than SKILL.md's front matter allows (1024 characters with the tool names); it is cut"},
		},
		{
			name: "schema without an example",
			m: &manifest.Manifest{Description: "d", Provides: manifest.Provides{Tools: []manifest.Tool{{
				Name: "add_note", RiskLevel: "low",
				ArgumentsSchema: json.RawMessage(`{"type":"object","required":["a"],"properties":{"a":{"type":"string","minLength":5,"maxLength":2}}}`),
			}}}},
			skills: md("p.md", "add_note"),
			want:   []string{"manifest.json: tool add_note: SKILL.md shows no example call: cannot generate sample arguments from the schema: a: minLength 5 is above maxLength 2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ws []Warning
			if tt.skills == nil {
				ws = Check(tt.m, nil)
			} else {
				ws = Check(tt.m, tt.skills)
			}
			got := make([]string, len(ws))
			for i, w := range ws {
				got[i] = w.String()
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("Check =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestCheckEchoIsClean(t *testing.T) {
	p := echoPlugin(t)
	if ws := Check(p.Manifest, p.Skills); len(ws) != 0 {
		t.Errorf("the echo plugin has warnings: %v", ws)
	}
	if ws := Check(nil, os.DirFS(".")); len(ws) != 1 {
		t.Errorf("Check(nil) = %v; want one warning", ws)
	}
}
