// Command render prints the objects a kustomization renders to, with the
// kustomize the checks of deploy/validate use, for reading them where
// kubectl is not at hand:
//
//	cd deploy/validate && go run ./render ../k8s/overlays/production
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: render KUSTOMIZATION_DIR")
		os.Exit(2)
	}
	if err := render(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func render(dir string) error {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return fmt.Errorf("render %s: %w", dir, err)
	}
	y, err := m.AsYaml()
	if err != nil {
		return fmt.Errorf("render %s as YAML: %w", dir, err)
	}
	_, err = os.Stdout.Write(y)
	return err
}
