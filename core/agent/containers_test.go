package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConversationIsTheOrigins: a conversation's id is derived from what
// started it, the group and the name, so that one plugin naming another's
// conversation gets one of its own; it is found once Claude Code has left
// its transcript.
func TestConversationIsTheOrigins(t *testing.T) {
	dir := t.TempDir()
	id, exists := conversation(dir, "telegram", "main", "telegram:42")
	if exists {
		t.Fatalf("conversation %s exists before any transcript", id)
	}
	if again, _ := conversation(dir, "telegram", "main", "telegram:42"); again != id {
		t.Fatalf("the same conversation got two ids: %s and %s", id, again)
	}
	for _, other := range []struct{ origin, group, name string }{
		{"intruder", "main", "telegram:42"},
		{"", "main", "telegram:42"},
		{"telegram", "side", "telegram:42"},
		{"telegram", "main", "telegram:43"},
		{"telegram\x00main", "", "telegram:42"},
	} {
		if got, _ := conversation(dir, other.origin, other.group, other.name); got == id {
			t.Errorf("%q in group %q naming %q got telegram's conversation %s", other.origin, other.group, other.name, id)
		}
	}
	transcripts := filepath.Join(dir, "projects", "-workspace")
	if err := os.MkdirAll(transcripts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(transcripts, id+".jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, exists := conversation(dir, "telegram", "main", "telegram:42"); !exists {
		t.Errorf("conversation %s not found with its transcript there", id)
	}
	if _, exists := conversation(dir, "intruder", "main", "telegram:42"); exists {
		t.Errorf("another origin naming the conversation resumes it")
	}
}
