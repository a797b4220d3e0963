//go:build !unix

package bench

import "errors"

func selfCPUSeconds() (float64, error) {
	return 0, errors.New("getrusage is not available on this system")
}
