package cli

import "github.com/spf13/cobra"

// authCmd groups the credential commands.
func (a *app) authCmd() *cobra.Command {
	return groupCmd(&cobra.Command{Use: "auth", Short: "Store, list and delete plugin credentials"})
}
