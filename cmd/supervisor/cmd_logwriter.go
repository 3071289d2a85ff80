package main

import (
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// newLogWriterCommand is the log hub the daemon starts for its servers'
// output (internal/daemon/loghub_unix.go, logwriter.Hub): it copies every pipe the
// daemon hands it on stdin (a unix socket) into its capped, rotated log,
// and for a stdio server to the host's stderr too.
func newLogWriterCommand() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:    "_log-writer --socket PATH",
		Short:  "Copy servers' output into size-capped, rotated logs (started by the daemon)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// It ends when its servers' output does (EOF), never on a
			// signal meant for a tree or the terminal: the servers' last
			// lines are still to be written. A host that went away makes
			// its tee fail with EPIPE instead of killing the hub.
			signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
			return runLogHub(cmd.Context(), socket)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the daemon's socket, re-joined when the daemon that started the hub is gone")
	return cmd
}
