package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
)

func newMetricsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "metrics",
		Short: "Print the daemon's Prometheus metrics once (text format)",
		Long: "Print the daemon's Prometheus metrics once, in the text exposition format: the\n" +
			"same families `supervisor daemon --metrics-addr 127.0.0.1:PORT` serves at /metrics,\n" +
			"asked over the daemon's socket (no HTTP endpoint needed).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp api.Metrics
			if err := call(api.TypeMetrics, nil, &resp); err != nil {
				return err
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), resp.Text)
			return err
		},
	}
}
