package agent

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/carapace-dev/carapace/core/claudemd"
)

// Two preparations of one group's folders at once (a warm container
// starting beside a session of the group) both make the shadowed places:
// neither fails because the other made one, or moved a wrong one aside,
// first. (CI failed once so: "mkdirat projects/-workspace: file exists".)
func TestShadowTargetsConcurrently(t *testing.T) {
	for round := range 40 {
		dir := filepath.Join(t.TempDir(), "claude")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 { // something of the wrong kind in a shadowed place: both move it aside
			if err := os.WriteFile(filepath.Join(dir, "agents"), []byte("planted"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = shadowTargets(dir, claudemd.ShadowedClaude) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		for _, rel := range claudemd.ShadowedClaude {
			if _, err := os.Lstat(filepath.Join(dir, rel)); err != nil {
				t.Fatalf("round %d: %s not made: %v", round, rel, err)
			}
		}
	}
}
