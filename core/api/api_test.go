package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
)

const id = "9f1c2a7e4b3d4c1f8e2a6b5d7c9e0f11"

func TestSessionRequestCheck(t *testing.T) {
	tests := []struct {
		name string
		req  api.SessionRequest
		want string // "" for no error
	}{
		{"the client runs the agent", api.SessionRequest{Group: "main"}, ""},
		{"none", api.SessionRequest{Group: "main", Runtime: "none"}, ""},
		{"a container with a prompt", api.SessionRequest{Group: "main", Runtime: "container", Prompt: "hi"}, ""},
		{"an engine with a command", api.SessionRequest{Group: "main", Runtime: "podman", Command: []string{"true"}}, ""},
		{"an unknown runtime", api.SessionRequest{Group: "main", Runtime: "lxc"},
			`invalid request: runtime "lxc": use one of none, container, docker, podman, apple`},
		{"a command without a container", api.SessionRequest{Group: "main", Command: []string{"sh"}},
			"invalid request: a command needs a container runtime; with the runtime none the client runs the agent itself"},
		{"a prompt with none: what the user wrote, for provenance", api.SessionRequest{Group: "main", Runtime: "none", Prompt: "hi"}, ""},
		{"a command and a prompt", api.SessionRequest{Group: "main", Runtime: "docker", Command: []string{"true"}, Prompt: "hi"},
			"invalid request: give a command or a prompt, not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.req.Check(), tt.want)
		})
	}
}

func TestDecisionCheck(t *testing.T) {
	ok := api.Decision{ID: id, ArgsHash: "e3b0c442", Surface: "cli", Decider: "alice"}
	tests := []struct {
		name string
		edit func(*api.Decision)
		want string
	}{
		{"a good one", func(*api.Decision) {}, ""},
		{"a prefix for an id", func(d *api.Decision) { d.ID = id[:8] },
			`invalid request: "9f1c2a7e" is not a confirmation id (32 hex digits; resolve a prefix with GET /v1/confirmations/{prefix})`},
		{"a long id is quoted cut", func(d *api.Decision) { d.ID = strings.Repeat("x", 500) }, `"` + strings.Repeat("x", 64) + `…" is not`},
		{"no hash", func(d *api.Decision) { d.ArgsHash = "" }, "invalid request: a decision needs the args_hash"},
		{"a surface that is not a word", func(d *api.Decision) { d.Surface = "CLI!" }, `invalid request: surface "CLI!": want a short lower-case word`},
		{"a long decider", func(d *api.Decision) { d.Decider = strings.Repeat("a", 129) }, "invalid request: decider: at most 128 printable characters"},
		{"an unprintable decider", func(d *api.Decision) { d.Decider = "al\x1bice" }, "decider: at most 128 printable characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := ok
			tt.edit(&d)
			checkErr(t, d.Check(), tt.want)
		})
	}
}

func TestFindConfirmation(t *testing.T) {
	list := []api.Confirmation{{ID: id}, {ID: "9f1c2a7e00000000000000000000aaaa"}, {ID: "0123456789abcdef0123456789abcdef"}}
	tests := []struct {
		name, ref string
		wantID    string
		wantErr   error
		wantMsg   string
	}{
		{"a full id", id, id, nil, ""},
		{"a unique prefix, any case, spaced", " 012345 ", "0123456789abcdef0123456789abcdef", nil, ""},
		{"a full id that is also a prefix of none else", "9F1C2A7E4B3D", id, nil, ""},
		{"an ambiguous prefix", "9f1c2a7e", "", api.ErrInvalid, "9f1c2a7e is ambiguous: it starts " + id + ", 9f1c2a7e00000000000000000000aaaa"},
		{"too short", "9f1c2", "", api.ErrInvalid, `"9f1c2": give at least 6 hex characters of a confirmation's id`},
		{"not hex", "zzzzzzzz", "", api.ErrInvalid, "give at least 6 hex characters"},
		{"too long", id + "0", "", api.ErrInvalid, "give at least 6 hex characters"},
		{"none", "abcdef", "", api.ErrNotFound, "not found: no confirmation abcdef (see carapace confirm list)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := api.FindConfirmation(list, tt.ref)
			if c.ID != tt.wantID || !errors.Is(err, tt.wantErr) || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Errorf("FindConfirmation(%q) = %q, %v; want %q, %v (%q)", tt.ref, c.ID, err, tt.wantID, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

func TestShortID(t *testing.T) {
	for in, want := range map[string]string{id: "9f1c2a7e", "abc": "abc", "": "", "ab\x1bcdefghij": `ab\u001bcdefg`} {
		if got := api.ShortID(in); got != want {
			t.Errorf("ShortID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExact(t *testing.T) {
	hidden := []api.Hidden{{Path: "a", Kind: "bearer", Chars: 40}}
	tests := []struct {
		name string
		c    api.Confirmation
		want bool
	}{
		{"nothing hidden or left out", api.Confirmation{}, true},
		{"hidden", api.Confirmation{Hidden: hidden}, false},
		{"hidden, but the arguments as they run", api.Confirmation{Hidden: hidden, Raw: true}, true},
		{"left out", api.Confirmation{ArgumentsOmitted: true}, false},
		{"left out, raw", api.Confirmation{ArgumentsOmitted: true, Raw: true}, false},
	}
	for _, tt := range tests {
		if got := tt.c.Exact(); got != tt.want {
			t.Errorf("%s: Exact() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// checkErr fails unless err is nil when want is "", or wraps ErrInvalid
// and says want.
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error %v, want none", err)
	case want != "" && (err == nil || !errors.Is(err, api.ErrInvalid) || !strings.Contains(err.Error(), want)):
		t.Errorf("error %v, want one wrapping ErrInvalid that says %q", err, want)
	}
}
