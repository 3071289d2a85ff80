package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "The config file: write a starter, show the effective configuration",
		Long: "The config file is $" + config.EnvConfig + ", else $XDG_CONFIG_HOME/supervisor/config.toml,\n" +
			"else ~/.config/supervisor/config.toml; `supervisor config init` writes a commented\n" +
			"starter there (an example: configs/config.toml).\n" +
			"Daemon flags and the environment overrides beat the file, which beats the\n" +
			"built-in defaults. The daemon reads it when it starts and refuses a bad one;\n" +
			"`supervisor daemon reload` (or SIGHUP) makes a running daemon re-read it.",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newConfigInitCommand(), newConfigShowCommand())
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
			e.WriteWarnings(cmd.ErrOrStderr())
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

func newConfigInitCommand() *cobra.Command {
	var force, toStdout bool
	cmd := &cobra.Command{
		Use:   "init [--force] [--print]",
		Short: "Write a commented starter config file (it changes nothing until edited)",
		Long: "Write a starter config file to the path `supervisor config show` reports: every\n" +
			"key with its default and what it does, all commented out, so that the file\n" +
			"changes nothing until a line is uncommented. `supervisor daemon reload` then\n" +
			"applies it to a running daemon.\n\n" +
			"An existing file is left alone unless --force, which keeps it as FILE.bak.\n" +
			"The directory is created 0700 and the file 0600. --print writes the starter\n" +
			"to stdout instead.\n\n" +
			"Not to be confused with `supervisor init`, the PID 1 of an agent container.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if toStdout && force {
				return &usageError{hintError{err: errors.New("--print writes to stdout, so --force has no file to replace"),
					hint: "drop one of them; see `supervisor config init --help`"}}
			}
			if toStdout {
				_, err := io.WriteString(cmd.OutOrStdout(), config.Starter())
				return err
			}
			path, err := config.Path(os.Getenv)
			if err != nil {
				return err
			}
			written, backup, err := config.WriteStarter(path, force)
			if errors.Is(err, fs.ErrExist) {
				return &hintError{err: fmt.Errorf("config init: %s already exists", path),
					hint: "edit it, or replace it with `supervisor config init --force` (the old file is kept as " + path + ".bak)"}
			}
			if err != nil {
				return fmt.Errorf("config init: %w", err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "wrote a starter config to %s\n", written)
			if backup != "" {
				fmt.Fprintf(w, "the old file is kept as %s\n", backup)
			}
			fmt.Fprintln(w, "every setting in it is commented out: uncomment what you want to change, then")
			fmt.Fprintln(w, "`supervisor daemon reload` applies it to a running daemon (`supervisor config show` checks it)")
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing file, keeping it as FILE.bak")
	cmd.Flags().BoolVar(&toStdout, "print", false, "write the starter to stdout, not to the file")
	return cmd
}
