package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "The config file: show the effective configuration",
		Long: "The config file is $" + config.EnvConfig + ", else $XDG_CONFIG_HOME/supervisor/config.toml,\n" +
			"else ~/.config/supervisor/config.toml (an example: configs/config.toml).\n" +
			"Daemon flags and the environment overrides beat the file, which beats the\n" +
			"built-in defaults. The daemon reads it when it starts and refuses a bad one;\n" +
			"`supervisor daemon reload` (or SIGHUP) makes a running daemon re-read it.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newConfigShowCommand())
	return cmd
}

func newConfigShowCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show [--json]",
		Short: "Print the effective configuration and where each value came from",
		Long: "Print the values a daemon started now would run with, each with its source:\n" +
			"default, FILE:LINE, or env NAME. It reads the same file and environment the\n" +
			"daemon would and needs no daemon; flags given to `supervisor daemon` beat these.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := config.Load(os.Getenv)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), struct {
					File   string         `json:"file"`
					Loaded bool           `json:"loaded"`
					Values []config.Entry `json:"values"`
				}{e.File, e.Loaded, e.Entries()})
			}
			w := cmd.OutOrStdout()
			if e.Loaded {
				fmt.Fprintf(w, "file: %s\n\n", e.File)
			} else {
				fmt.Fprintf(w, "file: %s (not found: built-in defaults)\n\n", e.File)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
			for _, x := range e.Entries() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Key, x.Value, x.Source)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
