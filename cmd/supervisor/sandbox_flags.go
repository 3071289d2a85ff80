package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// sandboxFlags are --sandbox, --allow-read, --allow-write, --allow-env,
// --network and --open-files (docs/sandbox.md).
type sandboxFlags struct {
	on                bool
	read, write, envs []string
	network           string
	openFiles         int
}

func (f *sandboxFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.on, "sandbox", false, "confine the server: it reads the system, its program, its package caches and its directory, writes the temp dir, sees little of the environment and none of your secrets (docs/sandbox.md; --sandbox=false lifts the config's)")
	cmd.Flags().StringArrayVar(&f.read, "allow-read", nil, "a path the sandboxed server may also read (~ is your home; repeatable; implies --sandbox)")
	cmd.Flags().StringArrayVar(&f.write, "allow-write", nil, "a path the sandboxed server may also write (repeatable; implies --sandbox)")
	cmd.Flags().StringArrayVar(&f.envs, "allow-env", nil, "an environment variable the sandboxed server also sees, or a prefix ending in * (repeatable; implies --sandbox)")
	cmd.Flags().IntVar(&f.openFiles, "open-files", 0, "the most files the sandboxed server may hold open (default 4096; implies --sandbox)")
	cmd.Flags().StringVar(&f.network, "network", "", "the sandboxed server's network: all, none, or HOST:PORT,... it reaches through the egress proxy (implies --sandbox)")
}

// parse reads the flags: the policy asked for (nil for none), and off for
// --sandbox=false. A rule given with --sandbox=false is a contradiction,
// said rather than guessed at.
func (f sandboxFlags) parse(cmd *cobra.Command) (spec *sandbox.Spec, off bool, err error) {
	rules := len(f.read)+len(f.write)+len(f.envs) > 0 || f.network != "" || cmd.Flags().Changed("open-files")
	if cmd.Flags().Changed("sandbox") && !f.on {
		if rules {
			return nil, false, fmt.Errorf("--sandbox=false with --allow-read, --allow-write, --allow-env, --network or --open-files: drop one or the other")
		}
		return nil, true, nil
	}
	if !f.on && !rules {
		return nil, false, nil
	}
	s := sandbox.Spec{Enabled: true, Read: f.read, Write: f.write, Env: f.envs, Network: f.network, OpenFiles: f.openFiles}
	if err := s.Validate(); err != nil {
		return nil, false, fmt.Errorf("--sandbox: %w", err)
	}
	return &s, false, nil
}
