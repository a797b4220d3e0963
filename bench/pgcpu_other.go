//go:build !linux

package bench

import "errors"

func postgresCPU() (map[int]float64, error) {
	return nil, errors.New("PostgreSQL's CPU is read from /proc/<pid>/stat: Linux only")
}
