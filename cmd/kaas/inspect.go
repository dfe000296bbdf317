package main

import "errors"

func runInspect(args []string) error { return errors.New("inspect: not built yet") }
