package main_test

import (
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil/deptest"
)

// TestDeps keeps the shipping binary free of what only tests and tools
// use: the offline test image and its builder, the test harnesses and the
// benchmarks. It links the real agent image's build (carapace setup
// --build-image), and that is the positive control: the listing sees the
// image packages it should.
func TestDeps(t *testing.T) {
	const mod = "github.com/carapace-dev/carapace/"
	const harness = "a test harness: linked by tests only"
	for _, target := range [][2]string{{"", ""}, {"darwin", "arm64"}} {
		deptest.Checker{
			GOOS:   target[0],
			GOARCH: target[1],
			Forbidden: map[string]string{
				mod + "Resources/agent/test":           "the offline test image: make image-test and the tests build it, never carapace",
				mod + "core/agentimage/agentimagetest": "the offline test image's builder: make image-test and the tests use it, never carapace",
				mod + "internal/testutil/...":          harness,
				mod + "cmd/wiring/coretest":            harness,
				mod + "core/plugin/plugintest":         harness,
				mod + "core/control/controltest":       harness,
				mod + "core/confirm/approvaltest":      harness,
				mod + "plugins/memory/memorytest":      harness,
				mod + "plugins/telegram/fakebot":       harness,
				mod + "app/desktoptest/...":            harness,
				mod + "cmd/benchreport/...":            "the benchmarks: make bench runs them",
			},
			Want: []string{mod + "Resources/agent", mod + "core/agentimage", mod + "cmd/wiring"},
		}.Check(t)
	}
}
