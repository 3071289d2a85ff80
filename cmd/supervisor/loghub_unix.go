//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/logwriter"
)

// runLogHub serves the daemon connected on stdin, then the next daemons
// at socket, until no pipe is left (logwriter.Hub.Run).
func runLogHub(ctx context.Context, socket string) error {
	if socket == "" {
		return errors.New("--socket is required")
	}
	fc, err := net.FileConn(os.Stdin)
	if err != nil {
		return fmt.Errorf("stdin is not the daemon's socket: %w", err)
	}
	os.Stdin.Close()
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return errors.New("stdin is not a unix socket")
	}
	conn, err := api.NewConn(uc)
	if err != nil {
		uc.Close()
		return err
	}
	dial := func(ctx context.Context) (*api.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := api.Dial(ctx, socket)
		if err != nil {
			return nil, err
		}
		return c.Conn, nil
	}
	h := logwriter.NewHub()
	err = h.Run(ctx, conn, dial)
	h.Wait()
	return err
}
