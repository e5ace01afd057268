"""The management plane (the Kamaji role): TenantControlPlane and DataStore, PKI, admin kubeconfigs."""
