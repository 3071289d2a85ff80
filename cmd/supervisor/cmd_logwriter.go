package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/logwriter"
)

// newLogWriterCommand is the process the daemon puts between a server and
// its log (daemon/logpipe_unix.go): it reads the server's output on stdin
// and writes the capped, rotated log, and with --tee copies it to its
// stdout (a stdio server's host stderr).
func newLogWriterCommand() *cobra.Command {
	var opt logwriter.Options
	var tee bool
	cmd := &cobra.Command{
		Use:    "_log-writer --file F --max-bytes N --keep K [--tee]",
		Short:  "Copy stdin into a size-capped, rotated log (started by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opt.Path == "" {
				return fmt.Errorf("--file is required")
			}
			// It ends when its server's output does (EOF), never on a
			// signal meant for the tree or the terminal: the server's last
			// lines are still to be written. A host that went away makes
			// the tee fail with EPIPE instead of killing the log.
			signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
			if tee {
				opt.Tee = os.Stdout
			}
			return logwriter.Copy(os.Stdin, opt)
		},
	}
	cmd.Flags().StringVar(&opt.Path, "file", "", "the live log file")
	cmd.Flags().Int64Var(&opt.MaxBytes, "max-bytes", 10<<20, "rotate before the file would pass this size")
	cmd.Flags().IntVar(&opt.Keep, "keep", 3, "rotated files kept")
	cmd.Flags().BoolVar(&tee, "tee", false, "copy everything to stdout too")
	return cmd
}
