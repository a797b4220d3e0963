//go:build !linux

package bench

import "errors"

func readMachine() machineSample {
	return machineSample{err: errors.New("the machine's CPU is read from /proc: Linux only")}
}
