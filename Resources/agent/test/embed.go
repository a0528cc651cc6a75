// Package agenttest holds the build files of Carapace's offline test agent
// image — the Containerfile and the scripted agent, test-agent — so that
// core/agentimage/agentimagetest can build it from any directory. See the
// Containerfile for what the image holds.
package agenttest

import _ "embed"

// Containerfile is the image's build file.
//
//go:embed Containerfile
var Containerfile []byte

// TestAgent is the scripted agent, a busybox sh script installed as
// /usr/local/bin/test-agent, the image's entrypoint.
//
//go:embed test-agent
var TestAgent []byte
