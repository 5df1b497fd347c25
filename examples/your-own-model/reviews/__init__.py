"""A user's own package: a review classifier (reviews.model) and the recipe that hands it to tritonsm (reviews.recipe)."""
