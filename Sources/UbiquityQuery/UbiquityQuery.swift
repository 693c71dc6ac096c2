// The query layer (issue 4): predicate language, SQL compiler, in-memory evaluator, fetch executor.
import UbiquityStorage
