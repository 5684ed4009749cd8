"""Authentication (SASL PLAIN and SCRAM) and authorization (Kafka's ACL model).

Pure logic plus blocking metadata-store helpers; the network layer drives the SASL state
machines and the dispatcher asks the authorizer.
"""
