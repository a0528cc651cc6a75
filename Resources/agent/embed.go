// Package agent holds the build files of Carapace's agent image — the
// Containerfile and the entrypoint, carapace-agent — so that
// core/agentimage (and with it `carapace setup`) can build the image
// from any directory. The image's managed settings are core/claudemd's
// (managed-settings.json here is a copy a test keeps equal). See the
// Containerfile for what the image holds.
package agent

import _ "embed"

// Containerfile is the image's build file.
//
//go:embed Containerfile
var Containerfile []byte

// Entrypoint is the image's entrypoint, installed as
// /usr/local/bin/carapace-agent.
//
//go:embed entrypoint.sh
var Entrypoint []byte
