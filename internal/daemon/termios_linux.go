package daemon

import "golang.org/x/sys/unix"

const termiosRequest = unix.TCGETS
