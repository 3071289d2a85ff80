package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/broker"
)

// newBrokerCommand is the broker process the daemon spawns for a shared
// server (design §11); it is not for people to run.
func newBrokerCommand() *cobra.Command {
	var socket string
	var linger time.Duration
	cmd := &cobra.Command{
		Use:    "_broker --socket PATH [--linger D] -- CMD [ARG...]",
		Short:  "Relay clients to one shared server (started by the daemon)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if socket == "" || len(args) == 0 {
				return fmt.Errorf("_broker needs --socket PATH and a command after --")
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			log := hclog.New(&hclog.LoggerOptions{Name: "broker", Output: os.Stderr, Level: hclog.Info})
			cwd, _ := os.Getwd()
			return broker.Serve(ctx, broker.ServeConfig{
				Socket: socket, Linger: linger, Ready: os.Stdout,
				Broker: broker.Config{Argv: args, Dir: cwd, Env: os.Environ(), Log: log},
			})
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the unix socket the daemon hands clients over")
	cmd.Flags().DurationVar(&linger, "linger", 30*time.Second, "how long to outlive the last client")
	return cmd
}
