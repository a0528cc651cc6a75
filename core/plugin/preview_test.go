package plugin

import (
	"strings"
	"testing"
)

// CheckDigest refuses a call whose content changed or that carries no
// approved digest, and lets through the one approved.
func TestCheckDigest(t *testing.T) {
	approved := Digest([]byte("hello"))
	tests := []struct {
		name     string
		approved string
		current  string
		ok       bool
	}{
		{"same content", approved, Digest([]byte("hello")), true},
		{"changed content", approved, Digest([]byte("hello!")), false},
		{"no approved digest", "", Digest([]byte("hello")), false},
		{"parts are not concatenation", Digest([]byte("ab"), []byte("c")), Digest([]byte("a"), []byte("bc")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := (&Request{Tool: "mail_send", PreviewDigest: tt.approved}).CheckDigest(tt.current)
			if tt.ok != (err == nil) {
				t.Fatalf("CheckDigest: %v; want ok %v", err, tt.ok)
			}
			if te, isTE := AsToolError(err); err != nil && (!isTE || te.Code != CodeContentChanged) {
				t.Errorf("error %v; want a ToolError %s", err, CodeContentChanged)
			}
		})
	}
}

// Check refuses a preview the core must not show or bind.
func TestPreviewCheck(t *testing.T) {
	tests := []struct {
		name string
		p    *Preview
		ok   bool
	}{
		{"good", &Preview{Text: "To: a@example.org\n\nhi\n", Digest: Digest([]byte("m"))}, true},
		{"nil", nil, false},
		{"blank text", &Preview{Text: " \n\t", Digest: "d"}, false},
		{"no digest", &Preview{Text: "x"}, false},
		{"text too large", &Preview{Text: strings.Repeat("x", MaxPreviewText+1), Digest: "d"}, false},
		{"text at the limit", &Preview{Text: strings.Repeat("x", MaxPreviewText), Digest: "d"}, true},
		{"text not UTF-8", &Preview{Text: "a\xffb", Digest: "d"}, false},
		{"digest too long", &Preview{Text: "x", Digest: strings.Repeat("d", MaxPreviewDigest+1)}, false},
		{"digest with a space", &Preview{Text: "x", Digest: "sha256: 1"}, false},
		{"digest with a newline", &Preview{Text: "x", Digest: "sha256:1\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Check(); (err == nil) != tt.ok {
				t.Errorf("Check() = %v; want ok %v", err, tt.ok)
			}
		})
	}
}
