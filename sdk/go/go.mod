module tourops.example/tourops

go 1.19
