package confine

import (
	"os"
	"testing"
)

// TestMain runs the test binary as a probe handler when a test starts it
// so (helper-process pattern, helper_linux_test.go), else the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// helperEnv selects the helper mode of a test binary started by a test.
const helperEnv = "CONFINE_TEST_HELPER"
